package config

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestJSON checks the JSON that GET /rules serves.
func TestJSON(t *testing.T) {
	c := mustLoad(t, "testdata/full.yaml")
	rules := c.Rules()
	for _, tc := range []struct {
		rule *Rule
		want string
	}{
		{rules[2], `{"domain":"api","path":"api.tenant_acme.path_/login","name":"acme_login","file":"testdata/full.yaml","line":26,` +
			`"unlimited":false,"unit":"hour","requests_per_unit":20,"period":"1h0m0s","algorithm":"token_bucket","burst":5,` +
			`"failure_policy":"fail_closed","shadow_mode":false,"detailed_metric":false}`},
		{rules[7], `{"domain":"api","path":"api.health","file":"testdata/full.yaml","line":67,"unlimited":true,"shadow_mode":false,"detailed_metric":false}`},
		{rules[8], `{"domain":"api","path":"api.api_key_500","file":"testdata/full.yaml","line":73,"unlimited":false,"unit":"year",` +
			`"requests_per_unit":4294967295,"period":"8760h0m0s","algorithm":"sliding_window","failure_policy":"fail_open",` +
			`"shadow_mode":false,"detailed_metric":false,"replaces":["per_ip","acme_login"]}`},
	} {
		got, err := json.Marshal(tc.rule)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != tc.want {
			t.Errorf("got  %s\nwant %s", got, tc.want)
		}
	}

	// The list and the whole tree marshal too.
	list, err := json.Marshal(rules)
	if err != nil {
		t.Fatal(err)
	}
	var views []RuleView
	if err := json.Unmarshal(list, &views); err != nil || len(views) != len(rules) {
		t.Fatalf("round trip: %v, %d views", err, len(views))
	}
	tree, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`{"domains":{"api":{"name":"api","file":"testdata/full.yaml","files":["testdata/full.yaml"],"descriptors":[{"key":"remote_address","rule":{`,
		`"value_to_metric":true`, `"files":["testdata/full.yaml"]}`} {
		if !strings.Contains(string(tree), want) {
			t.Errorf("tree %s\ndoes not contain %s", tree, want)
		}
	}
}
