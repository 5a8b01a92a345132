select Region, AVG(amount) as mean from Orders group by region
