-- intent: a LIKE pattern cast to bpchar loses its trailing spaces when it becomes text ('%\ '::bpchar is '%\'): refused
SELECT count(*) FROM orders WHERE region LIKE '%\ '::bpchar
