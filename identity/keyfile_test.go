package identity

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/delegateos/delegateos/internal/b64"
)

func testKeypair(t testing.TB, fill byte, name string) *Keypair {
	t.Helper()
	k, err := FromSeed(bytes.Repeat([]byte{fill}, 32), name)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// writeFile writes data with the given mode, whatever the umask.
func writeFile(t testing.TB, data string, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "key.json")
	if err := os.WriteFile(path, []byte(data), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestSaveKeyFile(t *testing.T) {
	k := testKeypair(t, 1, "alice")
	path := filepath.Join(t.TempDir(), "alice.json")
	if err := SaveKeyFile(path, k); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode() != 0o600 {
		t.Fatalf("key file mode %v, want -rw-------", st.Mode())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("key file is not JSON: %v\n%s", err, data)
	}
	want := map[string]any{
		"version":   float64(KeyFileVersion),
		"name":      "alice",
		"principal": k.ID(),
		"did":       k.DID(),
		"seed":      b64.Encode(k.Seed()),
	}
	if len(m) != len(want) {
		t.Fatalf("key file members %v, want %v", m, want)
	}
	for name, v := range want {
		if m[name] != v {
			t.Errorf("%s = %v, want %v", name, m[name], v)
		}
	}

	back, err := LoadKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if back.ID() != k.ID() || back.DID() != k.DID() || back.Name() != k.Name() || !bytes.Equal(back.Seed(), k.Seed()) {
		t.Fatalf("loaded %s %q, saved %s %q", back.ID(), back.Name(), k.ID(), k.Name())
	}
}

func TestSaveKeyFileWithoutName(t *testing.T) {
	k := testKeypair(t, 2, "")
	path := filepath.Join(t.TempDir(), "k.json")
	if err := SaveKeyFile(path, k); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(path)
	if bytes.Contains(data, []byte(`"name"`)) {
		t.Fatalf("empty name written: %s", data)
	}
	back, err := LoadKeyFile(path)
	if err != nil || back.ID() != k.ID() || back.Name() != "" {
		t.Fatalf("LoadKeyFile = %v, %v", back, err)
	}
}

func TestSaveKeyFileRefusesToOverwrite(t *testing.T) {
	first := testKeypair(t, 1, "first")
	path := filepath.Join(t.TempDir(), "k.json")
	if err := SaveKeyFile(path, first); err != nil {
		t.Fatal(err)
	}
	before, _ := os.ReadFile(path)
	err := SaveKeyFile(path, testKeypair(t, 2, "second"))
	if err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Fatalf("second SaveKeyFile: err = %v, want already exists", err)
	}
	after, _ := os.ReadFile(path)
	if !bytes.Equal(before, after) {
		t.Fatal("SaveKeyFile changed the existing key file")
	}

	// Not through a dangling symlink either: O_EXCL does not follow it.
	dir := t.TempDir()
	link := filepath.Join(dir, "link.json")
	target := filepath.Join(dir, "target.json")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if err := SaveKeyFile(link, first); err == nil {
		t.Fatal("SaveKeyFile wrote through a dangling symlink")
	}
	if _, err := os.Lstat(target); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("symlink target was created: %v", err)
	}
}

func TestSaveKeyFileMissingDirectory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "no", "such", "dir", "k.json")
	if err := SaveKeyFile(path, testKeypair(t, 1, "")); err == nil {
		t.Fatal("SaveKeyFile into a missing directory succeeded")
	}
}

func TestLoadKeyFileMissing(t *testing.T) {
	_, err := LoadKeyFile(filepath.Join(t.TempDir(), "absent.json"))
	if !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("err = %v, want fs.ErrNotExist", err)
	}
}

// validKeyFile returns the JSON of a correct key file for k.
func validKeyFile(k *Keypair) string {
	return `{"version":1,"name":"n","principal":"` + k.ID() + `","did":"` + k.DID() + `","seed":"` + b64.Encode(k.Seed()) + `"}`
}

func TestLoadKeyFilePermissions(t *testing.T) {
	k := testKeypair(t, 3, "n")
	tests := []struct {
		mode os.FileMode
		ok   bool
	}{
		{0o600, true},
		{0o400, true},
		{0o700, true},
		{0o200, true}, // unreadable to us unless root; refused by open, not by the check
		{0o640, false},
		{0o604, false},
		{0o644, false},
		{0o660, false},
		{0o666, false},
		{0o610, false},
		{0o601, false},
		{0o620, false},
		{0o602, false},
		{0o777, false},
	}
	for _, tt := range tests {
		t.Run(tt.mode.String(), func(t *testing.T) {
			path := writeFile(t, validKeyFile(k), tt.mode)
			got, err := LoadKeyFile(path)
			if tt.ok {
				if tt.mode&0o400 == 0 && os.Geteuid() != 0 {
					if err == nil || errors.Is(err, ErrKeyFilePermissions) {
						t.Fatalf("write-only file: err = %v", err)
					}
					return
				}
				if err != nil || got.ID() != k.ID() {
					t.Fatalf("LoadKeyFile = %v, %v", got, err)
				}
				return
			}
			if !errors.Is(err, ErrKeyFilePermissions) {
				t.Fatalf("err = %v, want ErrKeyFilePermissions", err)
			}
			if !strings.Contains(err.Error(), "chmod 600 "+path) {
				t.Fatalf("error %q does not say to run chmod 600 %s", err, path)
			}
		})
	}
}

func TestLoadKeyFileRefusesContent(t *testing.T) {
	k := testKeypair(t, 4, "n")
	other := testKeypair(t, 5, "")
	seed := b64.Encode(k.Seed())
	member := func(name, value string) string { return `"` + name + `":` + value }
	file := func(members ...string) string { return "{" + strings.Join(members, ",") + "}" }
	q := func(s string) string { return `"` + s + `"` }
	version, principal, did, seedM := member("version", "1"), member("principal", q(k.ID())), member("did", q(k.DID())), member("seed", q(seed))

	tests := []struct{ name, data string }{
		{"principal of another key", file(version, member("principal", q(other.ID())), did, seedM)},
		{"did of another key", file(version, principal, member("did", q(other.DID())), seedM)},
		{"principal written as did:key", file(version, member("principal", q(k.DID())), did, seedM)},
		{"did written as principal ID", file(version, principal, member("did", q(k.ID())), seedM)},
		{"no principal", file(version, did, seedM)},
		{"empty principal", file(version, member("principal", `""`), did, seedM)},
		{"unknown member", file(version, principal, did, seedM, member("comment", `"hi"`))},
		{"private key member", file(version, principal, did, seedM, member("privateKey", q(seed)))},
		{"member in wrong case", file(version, principal, did, member("Seed", q(seed)))},
		{"duplicate seed", file(version, principal, did, seedM, member("seed", q(b64.Encode(other.Seed()))))},
		{"duplicate principal", file(version, principal, did, seedM, member("principal", q(other.ID())))},
		{"duplicate escaped", file(version, principal, did, seedM, member(`s\u0065ed`, q(seed)))},
		{"no version", file(principal, did, seedM)},
		{"version 0", file(member("version", "0"), principal, did, seedM)},
		{"version 2", file(member("version", "2"), principal, did, seedM)},
		{"version as string", file(member("version", `"1"`), principal, did, seedM)},
		{"version 1.5", file(member("version", "1.5"), principal, did, seedM)},
		{"no seed", file(version, principal, did)},
		{"short seed", file(version, principal, did, member("seed", q(b64.Encode(k.Seed()[:31]))))},
		{"long seed", file(version, principal, did, member("seed", q(b64.Encode(append(k.Seed(), 0)))))},
		{"padded seed", file(version, principal, did, member("seed", q(seed+"=")))},
		{"seed with line break", file(version, principal, did, member("seed", q(seed[:10]+`\n`+seed[10:])))},
		{"hex seed", file(version, principal, did, member("seed", q("0404040404040404040404040404040404040404040404040404040404040404")))},
		{"invalid UTF-8 name", file(version, member("name", "\"\xff\""), principal, did, seedM)},
		{"unpaired surrogate name", file(version, member("name", `"\ud800"`), principal, did, seedM)},
		{"trailing data", file(version, principal, did, seedM) + "{}"},
		{"two documents", validKeyFile(k) + "\n" + validKeyFile(other)},
		{"empty file", ""},
		{"null", "null"},
		{"array", "[" + validKeyFile(k) + "]"},
		{"not JSON", "seed=" + seed},
	}
	if _, err := LoadKeyFile(writeFile(t, file(version, principal, did, seedM), 0o600)); err != nil {
		t.Fatalf("control: %v", err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := LoadKeyFile(writeFile(t, tt.data, 0o600))
			if err == nil {
				t.Fatalf("loaded %s from %s", got.ID(), tt.data)
			}
			if strings.Contains(err.Error(), seed) || strings.Contains(err.Error(), seed[:16]) {
				t.Fatalf("error reveals the seed: %v", err)
			}
		})
	}
}

func TestLoadKeyFileNotRegular(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "keydir")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := LoadKeyFile(dir)
	if err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("directory: err = %v, want not a regular file", err)
	}
	if errors.Is(err, ErrKeyFilePermissions) {
		t.Fatalf("directory: %v; chmod 600 would not help", err)
	}
}

func TestLoadKeyFileOversize(t *testing.T) {
	k := testKeypair(t, 6, "n")
	// Valid JSON all the way: only the size limit can refuse it.
	data := validKeyFile(k) + strings.Repeat(" ", maxKeyFileSize)
	path := writeFile(t, data, 0o600)
	_, err := LoadKeyFile(path)
	if err == nil || !strings.Contains(err.Error(), "bytes") {
		t.Fatalf("oversize file: err = %v", err)
	}
	// Just under the limit still loads.
	data = validKeyFile(k) + strings.Repeat(" ", maxKeyFileSize-len(validKeyFile(k)))
	if got, err := LoadKeyFile(writeFile(t, data, 0o600)); err != nil || got.ID() != k.ID() {
		t.Fatalf("file of exactly %d bytes: %v", maxKeyFileSize, err)
	}
}
