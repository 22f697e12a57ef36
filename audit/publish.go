package audit

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/mod/sumdb/tlog"

	"github.com/delegateos/delegateos/internal/canon"
)

// Paths of what serve publishes for witnesses.
const (
	// CheckpointPath answers GET with the log's latest checkpoint, and
	// with ?old=N with a C2SP tlog-witness add-checkpoint body: "old N",
	// the consistency proof from size N (a base64 hash a line), a blank
	// line and the checkpoint.
	CheckpointPath = "/audit/checkpoint"
	// CosignaturePath takes POST of a checkpoint of the log with
	// witnesses' cosignatures (C2SP tlog-cosignature) added, and keeps
	// those that verify.
	CosignaturePath = "/audit/cosignature"
)

// published is a checkpoint written to the file: its signed note, and
// the offset where its line ends.
type published struct {
	note []byte
	end  int64
}

// Latest is the last checkpoint written to the log's file and the tree
// of the entries up to it, read back from the file (O(n)).
func (l *Log) latest() (*treeLog, *published, error) {
	l.pubMu.Lock()
	p := l.pub
	l.pubMu.Unlock()
	if p == nil {
		return nil, nil, errors.New("no checkpoint has been written yet")
	}
	f, err := os.Open(l.path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	t, err := loadTreeFrom(io.NewSectionReader(f, 0, p.end), VerifyOptions{Trusted: []string{l.signer.DID()}}, 0)
	if err != nil {
		return nil, nil, err
	}
	return t, p, nil
}

// WitnessBody is the C2SP tlog-witness add-checkpoint body of the log's
// latest checkpoint for a witness that last saw size old: "old N", the
// consistency proof, a blank line, the checkpoint.
func (l *Log) WitnessBody(old int64) ([]byte, error) {
	t, p, err := l.latest()
	if err != nil {
		return nil, err
	}
	c, _ := t.latest()
	return witnessBody(t, c, p.note, old)
}

func witnessBody(t *treeLog, c treeCheck, note []byte, old int64) ([]byte, error) {
	if old < 0 {
		return nil, fmt.Errorf("old size %d is negative", old)
	}
	// A witness that saw more than the log now holds gets no proof: the
	// checkpoint alone shows it the log shrank.
	var proof tlog.TreeProof
	if old > 0 && old < c.Size {
		var err error
		if proof, err = tlog.ProveTree(c.Size, old, &t.store); err != nil {
			return nil, err
		}
	}
	out := fmt.Appendf(nil, "old %d\n", old)
	for _, h := range proof {
		out = append(append(out, base64.StdEncoding.EncodeToString(h[:])...), '\n')
	}
	out = append(out, '\n')
	return append(out, note...), nil
}

// parseWitnessBody reads an add-checkpoint body strictly.
func parseWitnessBody(b []byte) (old int64, proof tlog.TreeProof, note []byte, err error) {
	if len(b) > MaxCheckpointBytes+maxProofHashes*45+32 {
		return 0, nil, nil, errors.New("the add-checkpoint body is too long")
	}
	first, rest, ok := bytes.Cut(b, []byte("\n"))
	size, found := strings.CutPrefix(string(first), "old ")
	if !ok || !found {
		return 0, nil, nil, errors.New(`the add-checkpoint body does not start with "old N"`)
	}
	if old, err = strconv.ParseInt(size, 10, 64); err != nil || old < 0 || strconv.FormatInt(old, 10) != size {
		return 0, nil, nil, fmt.Errorf("the old size %q is not a decimal number", size)
	}
	for {
		line, r, ok := bytes.Cut(rest, []byte("\n"))
		if !ok {
			return 0, nil, nil, errors.New("the add-checkpoint body has no blank line before its checkpoint")
		}
		rest = r
		if len(line) == 0 {
			break
		}
		h, err := base64.StdEncoding.DecodeString(string(line))
		if err != nil || len(h) != tlog.HashSize || len(proof) == maxProofHashes {
			return 0, nil, nil, errors.New("the consistency proof is not at most 63 base64 hashes, a line each")
		}
		proof = append(proof, tlog.Hash(h))
	}
	return old, proof, rest, nil
}

// cosignatureLine is one line of a log's cosignature file: a witness's
// cosignature of the log's checkpoint of Size entries.
type cosignatureLine struct {
	Cosignature string `json:"cosignature"`
	Size        int64  `json:"size"`
}

// CosignaturesFile is where the cosignatures of the log at path are kept.
func CosignaturesFile(path string) string { return path + ".cosignatures" }

var cosignMu sync.Mutex

// AddCosignatures keeps the cosignatures of cosigned, a checkpoint signed
// by did (the log's key) with witnesses' cosignatures added, that verify,
// in the log's cosignature file; it returns the witnesses whose
// cosignatures were kept. A cosignature that does not verify is refused.
func AddCosignatures(logPath string, cosigned []byte, did string) ([]string, error) {
	cp, n, err := OpenCheckpoint(cosigned, did)
	if err != nil {
		return nil, err
	}
	var lines []byte
	var witnesses []string
	for _, s := range n.UnverifiedSigs {
		w, ok := strings.CutPrefix(s.Name, "witness.delegateos/")
		if !ok {
			return nil, fmt.Errorf("the signature of %q is not a witness's cosignature", s.Name)
		}
		w = "did:key:" + w
		if _, ws, err := OpenWitnessed(cosigned, did, []string{w}); err != nil || len(ws) != 1 {
			return nil, fmt.Errorf("the cosignature of %s does not verify: %v", w, err)
		}
		line, err := canon.Marshal(cosignatureLine{Cosignature: "— " + s.Name + " " + s.Base64 + "\n", Size: cp.Size})
		if err != nil {
			return nil, err
		}
		lines = append(append(lines, line...), '\n')
		witnesses = append(witnesses, w)
	}
	if len(witnesses) == 0 {
		return nil, errors.New("the checkpoint carries no witness's cosignature")
	}
	cosignMu.Lock()
	defer cosignMu.Unlock()
	f, err := os.OpenFile(CosignaturesFile(logPath), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	if _, err := f.Write(lines); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, err
	}
	return witnesses, f.Close()
}

// WitnessReport is what CheckWitnesses found: per witness, the largest
// checkpoint it cosigned.
type WitnessReport struct {
	Cosigned map[string]int64
}

// CheckWitnesses checks the log at path against its witnesses'
// cosignatures (in cosigs, a cosignature file): each of witnesses must
// have cosigned one of the log's checkpoints, and every cosignature by
// them must be of a checkpoint the log holds, unchanged. A log rewritten
// after a witness cosigned it fails here (Problem kind Forked).
func CheckWitnesses(path, cosigs string, witnesses []string, o VerifyOptions) (*WitnessReport, error) {
	t, err := loadTree(path, o)
	if err != nil {
		return nil, err
	}
	bySize := map[int64]treeCheck{}
	for _, c := range t.checks {
		bySize[c.Size] = c
	}
	want := map[string]bool{}
	for _, w := range witnesses {
		want[WitnessName(w)] = true
	}
	rep := &WitnessReport{Cosigned: map[string]int64{}}
	f, err := os.Open(cosigs)
	if err != nil {
		return nil, fmt.Errorf("the witnesses' cosignatures: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 4096), 4096)
	for no := 1; sc.Scan(); no++ {
		var l cosignatureLine
		if err := canonUnmarshal(sc.Bytes(), &l); err != nil {
			return nil, fmt.Errorf("%s line %d: %v", cosigs, no, err)
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(l.Cosignature, "— "), " ")
		if !want[name] {
			continue
		}
		w := "did:key:" + strings.TrimPrefix(name, "witness.delegateos/")
		c, ok := bySize[l.Size]
		if !ok {
			return nil, &Problem{Kind: Forked, Msg: fmt.Sprintf("the witness %s cosigned a checkpoint of %d entries, which this log does not have: the log was rewritten after the witness cosigned it", w, l.Size)}
		}
		if _, _, err := OpenWitnessed([]byte(c.note+l.Cosignature), c.signer, []string{w}); err != nil {
			return nil, &Problem{Kind: Forked, Line: c.entry, Entry: c.entry,
				Msg: fmt.Sprintf("the witness %s cosigned another checkpoint of %d entries than this log's: the log was rewritten after the witness cosigned it (%v)", w, l.Size, err)}
		}
		rep.Cosigned[w] = max(rep.Cosigned[w], l.Size)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%s: %v", cosigs, err)
	}
	for _, w := range witnesses {
		if _, ok := rep.Cosigned[w]; !ok {
			return rep, &Problem{Kind: Unwitnessed, Msg: fmt.Sprintf("the witness %s has cosigned none of the log's checkpoints", w)}
		}
	}
	return rep, nil
}

// canonUnmarshal reads the canonical JSON of v, and only that.
func canonUnmarshal(b []byte, v *cosignatureLine) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	again, err := canon.Marshal(v)
	if err != nil || !bytes.Equal(again, b) {
		return errors.New("not the canonical JSON of a cosignature line")
	}
	return nil
}

// NewWitnessHandler serves the log's latest checkpoint (CheckpointPath)
// and takes cosignatures of it (CosignaturePath) from witnesses, the
// did:keys whose cosignatures are kept: anyone can make a key, so others'
// are refused (none without witnesses), and each witness's cosignature of
// a checkpoint is kept once.
func NewWitnessHandler(l *Log, witnesses []string) http.Handler {
	allowed := map[string]bool{}
	for _, w := range witnesses {
		allowed[w] = true
	}
	var mu sync.Mutex
	kept := map[string]bool{}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+CheckpointPath, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		q := r.URL.Query().Get("old")
		if q == "" {
			l.pubMu.Lock()
			p := l.pub
			l.pubMu.Unlock()
			if p == nil {
				http.Error(w, "no checkpoint yet", http.StatusNotFound)
				return
			}
			w.Write(p.note)
			return
		}
		old, err := strconv.ParseInt(q, 10, 64)
		if err != nil || old < 0 {
			http.Error(w, "old must be a size", http.StatusBadRequest)
			return
		}
		b, err := l.WitnessBody(old)
		if err != nil {
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		w.Write(b)
	})
	mux.HandleFunc("POST "+CosignaturePath, func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxCheckpointBytes))
		if err != nil {
			http.Error(w, "the body is too long", http.StatusRequestEntityTooLarge)
			return
		}
		cp, n, err := OpenCheckpoint(b, l.signer.DID())
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		fresh := false
		for _, s := range n.UnverifiedSigs {
			did := "did:key:" + strings.TrimPrefix(s.Name, "witness.delegateos/")
			if !strings.HasPrefix(s.Name, "witness.delegateos/") || !allowed[did] {
				http.Error(w, fmt.Sprintf("%s is not a witness of this server (serve --witness)", s.Name), http.StatusForbidden)
				return
			}
			if !kept[did+" "+strconv.FormatInt(cp.Size, 10)] {
				fresh = true
			}
		}
		if !fresh && len(n.UnverifiedSigs) > 0 {
			fmt.Fprintln(w, "kept already")
			return
		}
		ws, err := AddCosignatures(l.path, b, l.signer.DID())
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		for _, d := range ws {
			kept[d+" "+strconv.FormatInt(cp.Size, 10)] = true
		}
		fmt.Fprintf(w, "kept the cosignatures of %s\n", strings.Join(ws, ", "))
	})
	return mux
}

// cosignaturesOf are the signature lines of the cosignatures kept for the
// log's checkpoint of size entries (none without a cosignature file).
func cosignaturesOf(logPath string, size int64) (string, error) {
	f, err := os.Open(CosignaturesFile(logPath))
	if errors.Is(err, os.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	defer f.Close()
	var out strings.Builder
	seen := map[string]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 4096), 4096)
	for sc.Scan() {
		var l cosignatureLine
		if err := canonUnmarshal(sc.Bytes(), &l); err != nil || l.Size != size || seen[l.Cosignature] {
			continue
		}
		seen[l.Cosignature] = true
		out.WriteString(l.Cosignature)
	}
	return out.String(), sc.Err()
}
