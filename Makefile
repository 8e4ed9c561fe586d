# Targets: test (the default), vet, fmt, bench, run.

GO ?= go

.DEFAULT_GOAL := test
.PHONY: test ensure-redis ensure-chromium vet fmt bench run reliability

## test: vet and run every test with the race detector (needs redis-server and Chromium; installs them as root).
test: ensure-redis ensure-chromium vet
	$(GO) test -race -count=1 -timeout 15m ./...

## ensure-redis: make sure redis-server and redis-cli are on PATH.
ensure-redis:
	bash scripts/ensure-redis.sh

## ensure-chromium: make sure /usr/bin/chromium runs, for the dashboard's browser test.
ensure-chromium:
	bash scripts/ensure-chromium.sh

## vet: go vet every package.
vet:
	$(GO) vet ./...

## fmt: gofmt every Go file in place.
fmt:
	gofmt -w .

## bench: run the benchmarks (see bench/run.sh).
bench: ensure-redis
	bash bench/run.sh

## run: start the service (gRPC 127.0.0.1:8081, HTTP and dashboard 127.0.0.1:8080) with the example rules, memory store; ARGS="--redis redis://127.0.0.1:6379" for Redis.
run:
	$(GO) run ./cmd/redlimit serve --config examples/config $(ARGS)

## reliability: rerun the fault tests and rewrite the figures in docs/RELIABILITY.md.
reliability: ensure-redis
	bash scripts/reliability.sh
