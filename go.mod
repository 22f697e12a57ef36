module github.com/delegateos/delegateos

go 1.26.0

require (
	github.com/gowebpki/jcs v1.0.2
	golang.org/x/crypto v0.58.0
)

require golang.org/x/sys v0.49.0 // indirect
