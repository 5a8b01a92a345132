-- intent: amount numeric(10,2) is bounded by its type (10^8), so amount * amount cannot overflow numeric whatever the rows hold: its operands are not clamped before the product (only the aggregate's argument is, as before)
SELECT sum(amount * amount) FROM orders
