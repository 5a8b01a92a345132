VACUUM orders
