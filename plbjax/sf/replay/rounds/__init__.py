"""The rounds: the loop over simulated time (`loop`) and how much search each round takes on
(`search`)."""
