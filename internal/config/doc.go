// Package config loads envoyproxy/ratelimit-compatible rule files, validates
// them, and matches request descriptors to rules.
//
// [Load] reads a file or a directory of files into a [Config]; [Config.Match]
// finds the [Rule] for a request descriptor; [Config.Rules] lists every rule,
// and a Rule marshals to JSON as its [RuleView]. A Config is immutable and
// safe for concurrent use: to reload, load a new one and swap the pointer.
//
// # Files
//
// Each file holds one domain, and no two files may hold the same one.
// [Load] takes a file, or a directory whose *.yaml and *.yml files it reads
// in name order, without descending into subdirectories. Entries whose names
// start with "." are skipped, and so are files with other extensions, so
// that the layout of a Kubernetes ConfigMap volume loads as expected:
//
//	/etc/redlimit/api.yaml -> ..data/api.yaml
//	/etc/redlimit/..data -> ..2024_05_01_10_00_00.000000001
//	/etc/redlimit/..2024_05_01_10_00_00.000000001/api.yaml
//
// An empty directory is a valid Config with no domains: every request is
// then allowed, as for any domain no file defines.
//
// # Format
//
// Files written for envoyproxy/ratelimit load unchanged, with the same
// meaning (see "Differences" below for the few exceptions):
//
//	domain: api                    # required, unique among the files
//	algorithm: sliding_window      # redlimit: the file's default algorithm
//	failure_policy: local          # redlimit: the file's default failure policy
//	descriptors:
//	  - key: remote_address        # required
//	    value: 10.0.0.1            # optional; "*" in it is a wildcard
//	    rate_limit:                # optional: no rate_limit, no limit here
//	      name: per_ip             # optional, for replaces
//	      unit: second             # second, minute, hour, day, week, month (30 days), year (365 days)
//	      requests_per_unit: 10    # 0 (deny all) to 4294967295
//	      unlimited: false         # true: always allowed; then no unit
//	      replaces:                # this rule replaces the named rules when both match
//	        - name: other_rule
//	      algorithm: token_bucket  # redlimit: overrides the file's default
//	      burst: 20                # redlimit: token_bucket only
//	      failure_policy: fail_open # redlimit: overrides the file's default
//	    shadow_mode: false         # true: decide and count, never deny
//	    detailed_metric: false     # true: metrics name the request's values
//	    value_to_metric: false     # recorded, see Descriptor.ValueToMetric
//	    descriptors:               # nested descriptors, the same shape
//	      - key: path
//	        value: /login
//
// Unit names are case-insensitive ("SECOND" works), as are algorithm and
// policy names. Values are taken as written ("value: 500" is the string
// "500"), booleans also accept YAML 1.1's yes, no, on and off, integers
// accept 0x, 0o and "_" separators, and anchors, aliases and merge keys
// ("<<") work. An optional key that is null (such as "value: ~") counts as
// absent.
//
// # Extensions
//
// redlimit adds three settings, which envoyproxy/ratelimit does not have:
//
//   - algorithm: fixed_window, sliding_log, sliding_window or token_bucket
//     (see package redlimit). At the top of a file it sets the default of its
//     rules; the default default is sliding_window. In a rate_limit it
//     overrides the file's default.
//   - burst: the token bucket's capacity, 1 or more. It defaults to
//     requests_per_unit, so a quiet key may spend a whole unit's allowance
//     at once, then gets requests_per_unit evenly spread over each unit. It
//     is an error with any other algorithm.
//   - failure_policy: local, fail_open or fail_closed: what a request gets
//     when Redis cannot be asked (see package resilient). At the top of a
//     file it sets the default of its rules; the default default is local.
//
// Every limit is checked as [redlimit.Limit.Validate] does, so the service
// never meets an invalid one: a sliding_log limit above
// [redlimit.MaxLogCount] requests per unit, or a burst too large for its
// rate, is a load error.
//
// # Matching
//
// A request descriptor is a list of (key, value) entries; it is matched one
// level of the tree per entry, as envoyproxy/ratelimit does. At each level
// the entry selects, among the descriptors with its key:
//
//  1. the one whose value is the entry's value (for a non-empty value);
//  2. else the first, in file order, whose value is a wildcard the entry's
//     value matches: each "*" stands for any run of characters, the empty
//     one included ("/api/*" matches "/api/" and "/api/v1/users",
//     "/api/*/action" matches "/api/42/action");
//  3. else the one with no value.
//
// If no descriptor is selected, nothing matches: there is no backtracking
// to a less specific descriptor. After the last entry, the descriptor
// reached gives its rate_limit, if it has one. So a rule applies only to
// request descriptors of exactly its depth: with
//
//	descriptors:
//	  - key: tenant
//	    value: acme
//	    descriptors:
//	      - key: user
//	        rate_limit: {unit: minute, requests_per_unit: 60}
//
// (tenant=acme, user=bob) gets 60 a minute, but (tenant=acme) and
// (tenant=acme, user=bob, path=/) get no limit, nor does (tenant=other,
// user=bob). A descriptor with no rate_limit and no children therefore
// exempts its value from the rules of its key alone.
//
// # Differences from envoyproxy/ratelimit
//
// redlimit rejects a few files envoyproxy/ratelimit accepts, where that one
// would do something the file most likely does not mean, or that redlimit
// cannot do:
//
//   - no requests_per_unit, which envoy reads as 0. Write
//     requests_per_unit: 0 to deny every request of a descriptor (a block
//     list entry, as in envoy's README): redlimit loads it as envoy does,
//     and answers OVER_LIMIT without counting anything (Rule.DenyAll).
//   - a unit beside unlimited: true (envoy rejects the valid unit names
//     there, and ignores a misspelt one); requests_per_unit beside
//     unlimited: true is ignored, as in envoy.
//   - a replaces name that no rule of the domain has.
//   - two descriptors of one level whose envoy names "key_value" collide,
//     such as key "a_b" and key "a" with value "b" (envoy rejects two of
//     the same key and value; it keys both of these as "a_b").
//   - two YAML documents in one file (envoy reads the first only), and a
//     domain in two files (envoy's MERGE_DOMAIN_CONFIG is not offered).
//   - share_threshold: true, quota_mode: true and metadata, which redlimit
//     does not implement ("false" and empty values are accepted).
//
// Wildcards compare the key exactly and match the value, where
// envoyproxy/ratelimit matches the pattern "key_value*" against
// "key_value" strings, so that there the entry (a_b, c) can select the
// descriptor key "a" value "b*".
//
// # Errors
//
// Every problem in a file is reported, up to 20, each as an [*Error]
// wrapping [ErrInvalid] that names the file, the line and the field:
//
//	rules/api.yaml:12: descriptors[0].rate_limit.unit: unknown unit "fortnight" (want second, minute, hour, day, week, month, year)
//
// Unknown keys are errors (with a suggestion for a misspelling), as are
// duplicate keys, missing keys and values of the wrong type.
package config
