package reputation

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestJSON(t *testing.T) {
	for _, c := range []struct {
		v    any
		want string
	}{
		{View{Name: "coordination"}, `{"name":"coordination","known":false}`},
		{View{Name: "reliability", Known: true, Score: 0.84, Raw: 0.9, Confidence: 0.5, SampleSize: 10, LastSignal: t0},
			`{"name":"reliability","known":true,"score":0.84,"rawScore":0.9,"confidence":0.5,"sampleSize":10,"lastSignal":"2026-02-15T10:30:00.000Z"}`},
		{TrustView{Agent: "did:key:zA"}, `{"agent":"did:key:zA","known":false}`},
		{TrustView{Agent: "did:key:zA", Known: true, Reliability: 0.4, Confidence: 0.5, SampleSize: 10, LastSignal: t0},
			`{"agent":"did:key:zA","known":true,"reliability":0.4,"confidence":0.5,"sampleSize":10,"lastSignal":"2026-02-15T10:30:00.000Z"}`},
		{Signal{Source: "did:key:zA", Dimension: DomainCompetence, Domain: "law", Score: 1, Timestamp: t0},
			`{"source":"did:key:zA","dimension":"domain-competence","domain":"law","score":1,"timestamp":"2026-02-15T10:30:00.000Z"}`},
	} {
		b, err := json.Marshal(c.v)
		if err != nil || string(b) != c.want {
			t.Errorf("%s, %v\nwant %s", b, err, c.want)
		}
	}
	c, err := ParseContract([]byte(foreignContract), "draft-coverage-report")
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"id":"contract:draft-coverage-report"`, `"status":"completed"`, `"result":null`, `"outputFormat":"knowledge-artifact"`, `"deadline":"2026-05-19T17:00:00.000Z"`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s lacks %s", b, want)
		}
	}
}

func TestObserver(t *testing.T) {
	w := testWorkspace(t)
	if _, err := w.Observer(); !strings.Contains(errString(err), "not found") {
		t.Fatalf("no IDENTITY.md: %v", err)
	}
	writeWS(t, w, "IDENTITY.md", "---\nawp: \"0.1.0\"\ntype: identity\nname: Jarvis\n---\n")
	if _, err := w.Observer(); !strings.Contains(errString(err), "no did field") {
		t.Fatalf("%v", err)
	}
	writeWS(t, w, "IDENTITY.md", "---\ntype: identity\ndid: \"not a did\"\n---\n")
	if _, err := w.Observer(); err == nil {
		t.Fatal("accepted a bad DID")
	}
	writeWS(t, w, "IDENTITY.md", "---\ntype: identity\ndid: \"did:key:zJarvis\"\n---\n")
	if did, err := w.Observer(); err != nil || did != "did:key:zJarvis" {
		t.Fatalf("%q %v", did, err)
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
