SET LOCAL dp.epsilon = 5
