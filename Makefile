# Targets: test (the default), vet, fmt, bench, run, fuzz, image, image-test, helm-test.

GO ?= go

# The packages of the published modules: the library (the root), the
# service (service/) and the Prometheus collector (prometheus/), each a
# module of its own that go.work joins; ./... alone stops at each. bench/
# (the comparisons with other libraries) is another module of the
# workspace, vetted but holding benchmarks only.
PKGS = ./... ./service/... ./prometheus/...

.DEFAULT_GOAL := test
.PHONY: test ensure-redis ensure-statsd ensure-chromium vet fmt bench run reliability fuzz fuzz-model image image-test helm-test

## test: vet and run every test of the modules with the race detector (needs redis-server, npm's statsd and Chromium; installs them as root).
test: ensure-redis ensure-statsd ensure-chromium vet
	$(GO) test -race -count=1 -timeout 15m $(PKGS)

## ensure-redis: make sure redis-server and redis-cli are on PATH.
ensure-redis:
	bash scripts/ensure-redis.sh

## ensure-statsd: install npm's statsd daemon (outside the repository) for the statsd tests.
ensure-statsd:
	bash scripts/ensure-statsd.sh

## ensure-chromium: make sure /usr/bin/chromium runs, for the dashboard's browser test.
ensure-chromium:
	bash scripts/ensure-chromium.sh

## vet: go vet every package of the library, the service, the collector and bench/.
vet:
	$(GO) vet $(PKGS) ./bench/...

## fmt: gofmt every Go file in place.
fmt:
	gofmt -w .

## bench: run the benchmarks (see bench/run.sh).
bench: ensure-redis
	bash bench/run.sh

## run: start the service (gRPC 127.0.0.1:8081, HTTP and dashboard 127.0.0.1:8080) with the example rules, memory store; ARGS="--redis redis://127.0.0.1:6379" for Redis.
run:
	$(GO) run ./service/cmd/redlimit serve --config examples/config $(ARGS)

## reliability: rerun the fault tests and rewrite the figures in docs/RELIABILITY.md.
reliability: ensure-redis
	bash scripts/reliability.sh

## fuzz: run every Fuzz target of the repository (found with go test -list) for FUZZTIME each (default 30s); a failing input lands in testdata/fuzz/, a seed from then on.
# One worker each: a Redis fuzz worker starts its own servers (six for
# FuzzModelCluster); a new input is minimized in at most 5 runs.
FUZZTIME ?= 30s
FUZZFLAGS ?= -parallel 1 -fuzzminimizetime 5x
fuzz: ensure-redis
	FUZZTIME=$(FUZZTIME) FUZZFLAGS="$(FUZZFLAGS)" bash scripts/fuzz.sh

# The model-based differential fuzz targets, as package:target:workers. Each Redis
# fuzz worker starts its own server (a cluster of six for FuzzModelCluster),
# so those run on one worker. A new interesting input is minimized in at
# most 5 runs: they find new coverage often, and minimizing each for
# seconds left the Redis targets at a few runs a second (a failure is
# minimized by the target itself).
MODEL_FUZZ = ./memory:FuzzModel:2 ./memory:FuzzModelBounded:2 ./redisstore:FuzzModel:1 ./redisstore:FuzzModelCluster:1

## fuzz-model: run the model-based differential fuzz targets (memory, Redis, Redis Cluster) for FUZZTIME each.
fuzz-model: ensure-redis
	@for t in $(MODEL_FUZZ); do \
		pkg=$${t%%:*}; rest=$${t#*:}; name=$${rest%%:*}; par=$${rest#*:}; \
		echo "== $$pkg $$name ($(FUZZTIME), $$par workers)"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime 5x -parallel $$par $$pkg || exit 1; \
	done

## image: build the container image localhost/redlimit:dev (IMAGE=name:tag) with podman or buildah, FROM scratch: no base image pulled (service/deploy/image/build.sh).
image:
	bash service/deploy/image/build.sh image

## image-test: build the image and test it: its files, its binary as the non-root user, and the container where podman can run one (as root; service/deploy/image/test.sh).
image-test: ensure-redis
	bash service/deploy/image/test.sh

## helm-test: helm lint and helm template of service/deploy/helm/redlimit (helm v4.3.2 by go run, pinned in service/deploy/helm_test.go; its first build takes minutes), the rendered objects checked as service/deploy/kubernetes's and compared with them. make test runs the same tests when helm is already built, and skips them if not.
helm-test:
	REDLIMIT_HELM_TEST=1 $(GO) test -count=1 -timeout 60m -run 'TestHelm|TestKubernetes' -v ./service/deploy/
