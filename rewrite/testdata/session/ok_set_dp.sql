-- intent: SET, RESET and SHOW of dp.* settings are answered by the proxy, names case-insensitive
SET dp.epsilon = 0.5; SET DP.Mechanism TO gaussian; SHOW dp.budget; RESET dp.epsilon; SET dp.delta = 1e-8; SET dp.notices = on
