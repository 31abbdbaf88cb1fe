"""The replay's state: the typed cluster the loop changes (`resident`), where its partitions and
replicas are (`places`), and its soundness checked (`invariants`)."""
