"""SF's scheduler on the replay's clock: which phase a round runs (`phases`), the PLB settings it
reads (`settings`), the movement throttles (`throttles`), History's ageing (`history`) and the
actions in flight until they complete (`inflight`)."""
