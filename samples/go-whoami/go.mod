module example.com/whoami

go 1.22
