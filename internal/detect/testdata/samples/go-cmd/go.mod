module github.com/example/todo

go 1.22

require (
	github.com/jackc/pgx/v5 v5.5.5
)
