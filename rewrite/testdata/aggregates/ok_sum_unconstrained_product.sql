-- intent: discount is an unconstrained numeric (values up to 10^131072, whatever its configured bounds): each operand of discount * discount is clamped to [-2.5, 1000] (NULL kept NULL) before the product, so one person's huge value cannot overflow numeric after the charge; values within the bounds are unchanged
SELECT sum(discount * discount) FROM orders
