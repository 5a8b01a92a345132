-- intent: floor(discount) of an unconstrained numeric is not bounded by its type either: as an operand of arithmetic it is clamped to [floor(-2.5), ceil(1000)] before the product
SELECT sum(floor(discount) * floor(discount)) FROM orders
