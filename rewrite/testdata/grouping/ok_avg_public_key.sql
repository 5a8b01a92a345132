-- intent: AVG grouped by a key with configured public values releases every public value and no other, without partition selection, and matches names case-insensitively
select Region, AVG(amount) as mean from Orders group by region
