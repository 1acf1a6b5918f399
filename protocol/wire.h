// The protocol's wire format in one include (docs/protocol.md, "Messages"): message bodies and their
// canonical encoding (protocol/codec.h) and the Ed25519-signed envelope that carries them
// (protocol/envelope.h). Key files are outside the protocol layer, which does no file I/O:
// nodes/key_file.h.
#pragma once

#include "protocol/codec.h"
#include "protocol/envelope.h"
