package proxy

import "errors"

// RequestToken returns the DCT a client frame presents in
// params._delegateos.dct, read exactly as the relay reads it, or "" when
// it presents none or the relay decides nothing with it there (a
// notification, a response, a request forwarded undecided): the session's
// token then applies. A frame whose header, params or _delegateos the
// relay would refuse is an error. A
// transport that checks something about the token a request will be
// decided with, such as its holder's signature, reads it here so that it
// sees the token the gate sees.
func RequestToken(frame []byte) (string, error) {
	h, err := scanClientHeader(frame)
	if err != nil {
		return "", err
	}
	if h.params == nil {
		return "", nil
	}
	if r := roleOf(h.method); h.kind != kindRequest || r == roleForward {
		// The relay decides nothing else with the message's own token:
		// the session's applies to it. (An unknown method may be a vendor
		// extension the policy gates, decided with its own token.)
		return "", nil
	}
	cp, err := readCallParams(h.params)
	if err != nil {
		return "", err
	}
	d, bad := readDelegateos(cp.delegateos)
	if bad != "" {
		return "", errors.New(bad)
	}
	return d.DCT, nil
}
