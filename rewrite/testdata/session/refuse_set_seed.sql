SET seed = 0.5
