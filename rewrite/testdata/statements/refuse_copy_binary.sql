-- intent: the binary COPY format is not written by the proxy
COPY (SELECT name FROM products) TO STDOUT WITH (FORMAT binary)
