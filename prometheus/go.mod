module github.com/redlimit/redlimit/prometheus

go 1.26.0

require (
	github.com/prometheus/client_golang v1.25.0
	github.com/redlimit/redlimit v0.1.0
)
