-- intent: DDL (CREATE TABLE) is refused
CREATE TABLE t (a int)
