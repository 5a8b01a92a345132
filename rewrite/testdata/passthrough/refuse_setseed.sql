SELECT setseed(0.5)
