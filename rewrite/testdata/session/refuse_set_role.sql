SET ROLE admin
