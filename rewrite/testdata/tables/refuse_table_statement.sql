-- intent: TABLE orders is refused like SELECT *
TABLE orders
