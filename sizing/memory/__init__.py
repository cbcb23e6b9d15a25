# The memory model, one module per concern (see memory-model.md): regime -> weights, adapters,
# optimizer, activations, loss -> timeline.
