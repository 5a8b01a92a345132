SELECT sum(amount) FROM orders WHERE region = 'north' AND amount BETWEEN 1 AND 100
