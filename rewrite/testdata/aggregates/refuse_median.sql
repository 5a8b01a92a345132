SELECT median(amount) FROM orders
