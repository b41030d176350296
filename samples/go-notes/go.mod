module example.com/go-notes

go 1.22
