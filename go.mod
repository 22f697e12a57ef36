module github.com/delegateos/delegateos

go 1.26.0

require (
	github.com/gowebpki/jcs v1.0.2
	github.com/rogpeppe/go-internal v1.16.0
	github.com/spf13/pflag v1.0.10
	golang.org/x/crypto v0.58.0
)

require (
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/tools v0.26.0 // indirect
)
