SET LOCAL work_mem = '1GB'
