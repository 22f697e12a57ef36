// Package credential issues and verifies W3C Verifiable Credentials 2.0
// secured with Data Integrity proofs of the cryptosuite eddsa-jcs-2022
// (W3C vc-di-eddsa §3.3, vc-data-integrity §4), signed by Ed25519 keys named
// as did:key.
//
// # The proof
//
// Sign clones the proof options, copies the document's @context into them,
// and signs hashData = SHA-256(JCS(proof options)) ‖ SHA-256(JCS(document)),
// JCS being RFC 8785; proofValue is 'z' and the base58btc of the 64-byte
// signature. Verify undoes it: the document without proof, the proof without
// proofValue, the same hashes, Ed25519 verification under the key the
// verificationMethod names. Trace holds every intermediate value, so that a
// test can compare each with the W3C test vectors byte for byte.
//
// # What Verify refuses
//
// A credential is untrusted input. Verify reads at most MaxSize bytes of
// strict JSON (no duplicate member names at any depth, valid UTF-8, no
// unpaired surrogate escapes, nesting within MaxDepth, integers within
// ±(2^53−1)), and then refuses, each with an error naming the check
// (*Error) and its kind (errors.Is with the Err* sentinels):
//
//   - a proof set or chain (proof an array, previousProof), a proof type or
//     cryptosuite other than DataIntegrityProof / eddsa-jcs-2022, proof
//     members the cryptosuite does not define;
//   - a verificationMethod that is not an Ed25519 did:key with its own
//     multibase key as fragment (did:key:z6Mk…#z6Mk…): keys are never
//     fetched; a key of small order (under which a signature can be made
//     without a private key) is refused too;
//   - a proofPurpose other than assertionMethod, a created or expires that
//     is not an XML Schema dateTimeStamp, an expired proof;
//   - a proof @context that is not the document's @context. The
//     cryptosuite only asks that it be a prefix and verifies the document
//     under the proof's contexts; entries appended after signing would
//     change what the document's terms mean while the signature still
//     held, so they are refused instead;
//   - a signature that does not verify;
//   - a document that is not a VC 2.0 credential (@context starting with
//     ContextV2, a type with VerifiableCredential, an issuer, a
//     credentialSubject), or outside its validFrom–validUntil window;
//   - for an AgentDelegation (AVP's DelegationReceipt), anything its shape
//     rules refuse (AVP's verifier rules: both contexts and types, the
//     issuer a did:key that signs, the scope entries it defines, a window of
//     YYYY-MM-DDTHH:MM:SSZ dates; and a credentialSubject.delegator, if
//     there is one, that is the issuer), and for a ReputationCredential anything
//     but the shape IssueReputation writes (its issuer the did:key that
//     signs, too).
//
// The issuer need not be the signer: the cryptosuite does not bind them
// (the W3C vectors are issued by a URL). Result says whether it is, and
// VerifyOptions.Signer pins the key a caller trusts. An issuer that is a
// did:key, though, has no key but its own, so a proof by another key is
// refused.
//
// # AVP's legacy construction
//
// AVP signed its first DelegationReceipts over JCS(document) alone, under
// the same cryptosuite label, with a proof that has no proofPurpose. That is
// not eddsa-jcs-2022, and Verify refuses it unless
// VerifyOptions.AllowAVPLegacy asks for it; Result.Construction says which
// was verified.
package credential
