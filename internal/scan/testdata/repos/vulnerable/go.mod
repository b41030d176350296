module example.com/vulnerable

go 1.22

require (
	golang.org/x/text v0.3.7
	golang.org/x/mod v0.41.0
	example.com/local v1.0.0
)

require golang.org/x/net v0.0.0-20220722155237-a158d28d115b // indirect

replace example.com/local => ./local
