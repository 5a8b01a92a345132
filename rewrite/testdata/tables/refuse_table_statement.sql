TABLE orders
