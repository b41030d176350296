module hostile

go 1.22
