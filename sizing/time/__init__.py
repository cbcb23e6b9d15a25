# Step-time roofline: the kernels of a training step and the seconds each costs on a GPU.
