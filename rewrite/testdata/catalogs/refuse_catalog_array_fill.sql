-- intent: array_fill is not on the pass-through list: a few bytes of SQL ask for an array of up to 1 GB, unlike the array functions whose result is as large as their arguments
SELECT array_length(array_fill(0, ARRAY[100000000]), 1)
