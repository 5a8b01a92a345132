SELECT random()
