package config_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/redlimit/redlimit/service/internal/config"
)

// A rule file is parsed into a domain; a Config matches request
// descriptors to its rules.
func Example() {
	domain, err := config.Parse("api.yaml", []byte(`
domain: api
descriptors:
  - key: remote_address
    rate_limit:
      unit: minute
      requests_per_unit: 100
  - key: remote_address
    value: 10.0.0.1
    rate_limit:
      unit: second
      requests_per_unit: 10
      algorithm: token_bucket
      burst: 20
  - key: path
    value: /static/*
    rate_limit:
      unlimited: true
`))
	if err != nil {
		log.Fatal(err)
	}
	c, err := config.New(domain)
	if err != nil {
		log.Fatal(err)
	}
	for _, entries := range [][]config.Entry{
		{{Key: "remote_address", Value: "10.0.0.1"}},
		{{Key: "remote_address", Value: "10.0.0.2"}},
		{{Key: "path", Value: "/static/logo.png"}},
		{{Key: "path", Value: "/login"}},
	} {
		switch r := c.Match("api", entries); {
		case r == nil:
			fmt.Printf("%v: no limit\n", entries)
		case r.Unlimited:
			fmt.Printf("%v: %s, unlimited\n", entries, r.Path)
		default:
			fmt.Printf("%v: %s, %s\n", entries, r.Path, r.Limit)
		}
	}
	// Output:
	// [{remote_address 10.0.0.1}]: api.remote_address_10.0.0.1, 10/1s token_bucket burst 20
	// [{remote_address 10.0.0.2}]: api.remote_address, 100/1m sliding_window
	// [{path /static/logo.png}]: api.path_/static/*, unlimited
	// [{path /login}]: no limit
}

// Load reads a directory of rule files; errors name the file, the line and
// the field.
func ExampleLoad() {
	c, err := config.Load("testdata/dir")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(c.Files)
	enc := json.NewEncoder(os.Stdout)
	for _, r := range c.Rules() {
		if err := enc.Encode(r); err != nil {
			log.Fatal(err)
		}
	}

	_, err = config.Load("testdata/invalid/unknown_unit.yaml")
	fmt.Println(err)
	fmt.Println(errors.Is(err, config.ErrInvalid))
	// Output:
	// [testdata/dir/api.yaml testdata/dir/web.yml]
	// {"domain":"api","path":"api.user","file":"testdata/dir/api.yaml","line":3,"unlimited":false,"unit":"second","requests_per_unit":10,"period":"1s","algorithm":"sliding_window","failure_policy":"local","shadow_mode":false,"detailed_metric":false}
	// {"domain":"web","path":"web.path_/login","file":"testdata/dir/web.yml","line":3,"unlimited":false,"unit":"minute","requests_per_unit":5,"period":"1m0s","algorithm":"sliding_window","failure_policy":"local","shadow_mode":false,"detailed_metric":false}
	// testdata/invalid/unknown_unit.yaml:5: descriptors[0].rate_limit.unit: unknown unit "fortnight" (want second, minute, hour, day, week, month, year)
	// true
}
