// Package identity holds principals: Ed25519 keypairs, their principal IDs
// (the unpadded base64url of the 32-byte public key, DelegateOS §2), the
// equivalent W3C did:key form used by the RDP and AVP specifications, and key
// files on disk.
//
// A principal may be named either way; ParsePrincipal accepts both and
// returns the public key, and every structure the project signs stores the
// base64url principal ID.
package identity
