/*++

Module Name:

    ntlm.c

Abstract:

    smbdirect-client's user sessions: the NTLMv2 response ([MS-NLMP] §3.3.2) and session key, the SMB 3.0.x
    signing key ([MS-SMB2] §3.1.4.2, SP800-108 counter mode over HMAC-SHA256) and AES-CMAC signatures
    ([MS-SMB2] §3.1.4.1). The cryptography is OpenSSL's libcrypto: MD4, HMAC-MD5, HMAC-SHA256, AES-CMAC and the
    random client challenge; nothing here implements a cipher or a hash.

Environment:

    Kernel mode (softndk kernel layer), the client worker at PASSIVE_LEVEL. A Windows driver would call CNG
    (BCrypt*) for the same primitives.

--*/

/* libcrypto 3.0 keeps MD4 as a low-level function only (its EVP form is in the legacy provider) */
#define OPENSSL_SUPPRESS_DEPRECATED 1
#include <openssl/core_names.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/md4.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#include "smbdirect_client.h"

#define SC_AV_EOL 0
#define SC_AV_TIMESTAMP 7

static ULONG ScUtf16(PCSTR Text, BOOLEAN Upper, UCHAR* Out, ULONG OutBytes) {
    ULONG n = 0;
    for (; Text[n] != 0 && 2 * n + 1 < OutBytes; ++n) {
        CHAR c = Text[n];
        if (Upper && c >= 'a' && c <= 'z') c = (CHAR)(c - 'a' + 'A');
        Out[2 * n] = (UCHAR)c;
        Out[2 * n + 1] = 0;
    }
    return 2 * n;
}

static BOOLEAN ScHmac(const EVP_MD* Md, const UCHAR* Key, ULONG KeyLength, const UCHAR* Data, SIZE_T Length,
                      UCHAR* Out) {
    unsigned int outLength = 0;
    return HMAC(Md, Key, (int)KeyLength, Data, Length, Out, &outLength) != NULL;
}

/* The server's MsvAvTimestamp, if its target info has one. */
static BOOLEAN ScTimestampOf(const UCHAR* Info, ULONG Length, ULONG64* Time) {
    ULONG at = 0;
    while (at + 4 <= Length) {
        USHORT id = (USHORT)(Info[at] | Info[at + 1] << 8), size = (USHORT)(Info[at + 2] | Info[at + 3] << 8);
        if (id == SC_AV_EOL || at + 4 + size > Length) break;
        if (id == SC_AV_TIMESTAMP && size == 8) {
            RtlCopyMemory(Time, Info + at + 4, 8);
            return TRUE;
        }
        at += 4 + size;
    }
    return FALSE;
}

/* Builds the AUTHENTICATE message for User/Password (empty domain) answering Challenge, into Out; keeps the
 * session key and the signing key derived from it. */
NTSTATUS ScNtlmAuthenticate(const UCHAR* Challenge, ULONG ChallengeLength, ULONG Flags, UCHAR* Out, PULONG OutLength) {
    const NTLM_CHALLENGE* challenge = (const NTLM_CHALLENGE*)Challenge;
    NTLM_AUTHENTICATE* message = (NTLM_AUTHENTICATE*)Out;
    UCHAR password[2 * 64], identity[2 * 64], ntHash[MD4_DIGEST_LENGTH], ntowf[16], proof[16];
    UCHAR blob[512], proofInput[8 + sizeof(blob)], user[2 * 64];
    ULONG passwordBytes, identityBytes, userBytes, blobLength, infoOffset, infoLength, end;
    ULONG64 time = 0;
    LARGE_INTEGER now;
    if (ChallengeLength < sizeof(NTLM_CHALLENGE)) return STATUS_INVALID_NETWORK_RESPONSE;
    infoOffset = challenge->TargetInfo.Offset;
    infoLength = challenge->TargetInfo.Length;
    if ((ULONG64)infoOffset + infoLength > ChallengeLength || infoLength > sizeof(blob) - 32)
        return STATUS_INVALID_NETWORK_RESPONSE;
    /* NTOWFv2 = HMAC-MD5(MD4(UNICODE(Password)), UNICODE(Upper(User) + Domain)), the domain empty (§3.3.2) */
    passwordBytes = ScUtf16(g_Sc.Password, FALSE, password, sizeof(password));
    MD4(password, passwordBytes, ntHash);
    identityBytes = ScUtf16(g_Sc.User, TRUE, identity, sizeof(identity));
    if (!ScHmac(EVP_md5(), ntHash, sizeof(ntHash), identity, identityBytes, ntowf)) return STATUS_INTERNAL_ERROR;
    /* temp = 1, 1, Z(6), Time, ClientChallenge, Z(4), ServerInfo, Z(4) */
    if (!ScTimestampOf(Challenge + infoOffset, infoLength, &time)) {
        KeQuerySystemTime(&now);
        time = (ULONG64)now.QuadPart;
    }
    RtlZeroMemory(blob, sizeof(blob));
    blob[0] = 1;
    blob[1] = 1;
    RtlCopyMemory(blob + 8, &time, 8);
    if (RAND_bytes(blob + 16, 8) != 1) return STATUS_INTERNAL_ERROR;
    RtlCopyMemory(blob + 28, Challenge + infoOffset, infoLength);
    blobLength = 28 + infoLength + 4;
    /* NTProofStr = HMAC-MD5(NTOWFv2, ServerChallenge + temp); the session key = HMAC-MD5(NTOWFv2, NTProofStr) */
    RtlCopyMemory(proofInput, challenge->ServerChallenge, 8);
    RtlCopyMemory(proofInput + 8, blob, blobLength);
    if (!ScHmac(EVP_md5(), ntowf, sizeof(ntowf), proofInput, 8 + blobLength, proof) ||
        !ScHmac(EVP_md5(), ntowf, sizeof(ntowf), proof, sizeof(proof), g_Sc.SessionKey))
        return STATUS_INTERNAL_ERROR;
    /* the message: header, then LM response Z(24), NT response (proof + temp), the user name */
    userBytes = ScUtf16(g_Sc.User, FALSE, user, sizeof(user));
    end = sizeof(NTLM_AUTHENTICATE);
    if (end + 24 + 16 + blobLength + userBytes > *OutLength) return STATUS_BUFFER_TOO_SMALL;
    RtlZeroMemory(message, sizeof(*message));
    RtlCopyMemory(message->Signature, "NTLMSSP", 8);
    message->MessageType = 3;
    message->NegotiateFlags = Flags;
    message->LmChallengeResponse.Length = message->LmChallengeResponse.MaxLength = 24;
    message->LmChallengeResponse.Offset = end;
    RtlZeroMemory(Out + end, 24);
    end += 24;
    message->NtChallengeResponse.Length = message->NtChallengeResponse.MaxLength = (USHORT)(16 + blobLength);
    message->NtChallengeResponse.Offset = end;
    RtlCopyMemory(Out + end, proof, 16);
    RtlCopyMemory(Out + end + 16, blob, blobLength);
    end += 16 + blobLength;
    message->UserName.Length = message->UserName.MaxLength = (USHORT)userBytes;
    message->UserName.Offset = end;
    RtlCopyMemory(Out + end, user, userBytes);
    end += userBytes;
    message->DomainName.Offset = message->Workstation.Offset = message->EncryptedRandomSessionKey.Offset = end;
    *OutLength = end;
    return ScDeriveSigningKey();
}

/* [MS-SMB2] §3.1.4.2: SigningKey = KDF(SessionKey, "SMB2AESCMAC\0", "SmbSign\0"), 128 bits. */
NTSTATUS ScDeriveSigningKey(void) {
    static const UCHAR label[] = "SMB2AESCMAC", context[] = "SmbSign";
    UCHAR input[4 + sizeof(label) + 1 + sizeof(context) + 4], out[32];
    ULONG at = 0;
    input[at++] = 0, input[at++] = 0, input[at++] = 0, input[at++] = 1; /* i = 1, big-endian */
    RtlCopyMemory(input + at, label, sizeof(label));
    at += sizeof(label);
    input[at++] = 0;
    RtlCopyMemory(input + at, context, sizeof(context));
    at += sizeof(context);
    input[at++] = 0, input[at++] = 0, input[at++] = 0, input[at++] = 128; /* L = 128, big-endian */
    if (!ScHmac(EVP_sha256(), g_Sc.SessionKey, sizeof(g_Sc.SessionKey), input, at, out)) return STATUS_INTERNAL_ERROR;
    RtlCopyMemory(g_Sc.SigningKey, out, sizeof(g_Sc.SigningKey));
    g_Sc.SigningKeyReady = TRUE;
    return STATUS_SUCCESS;
}

/* AES-128-CMAC of Prefix (may be empty) and Message under the signing key. */
static BOOLEAN ScCmac2(const UCHAR* Prefix, ULONG PrefixLength, const UCHAR* Message, ULONG Length, UCHAR* Mac) {
    EVP_MAC* mac = EVP_MAC_fetch(NULL, "CMAC", NULL);
    EVP_MAC_CTX* context = mac != NULL ? EVP_MAC_CTX_new(mac) : NULL;
    OSSL_PARAM parameters[2];
    size_t length = 0;
    BOOLEAN ok;
    parameters[0] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_CIPHER, (char*)"AES-128-CBC", 0);
    parameters[1] = OSSL_PARAM_construct_end();
    ok = context != NULL && EVP_MAC_init(context, g_Sc.SigningKey, sizeof(g_Sc.SigningKey), parameters) == 1 &&
         (PrefixLength == 0 || EVP_MAC_update(context, Prefix, PrefixLength) == 1) &&
         EVP_MAC_update(context, Message, Length) == 1 && EVP_MAC_final(context, Mac, &length, 16) == 1 && length == 16;
    EVP_MAC_CTX_free(context);
    EVP_MAC_free(mac);
    return ok;
}

static BOOLEAN ScCmac(const UCHAR* Message, ULONG Length, UCHAR* Mac) {
    return ScCmac2(NULL, 0, Message, Length, Mac);
}

/* §3.1.4.1: the SIGNED flag set, the signature field zeroed, then the CMAC of the whole message put there. */
NTSTATUS ScSign(UCHAR* Message, ULONG Length) {
    SMB2_HEADER* header = (SMB2_HEADER*)Message;
    UCHAR mac[16];
    header->Flags |= SMB2_FLAGS_SIGNED;
    RtlZeroMemory(header->Signature, sizeof(header->Signature));
    if (!ScCmac(Message, Length, mac)) return STATUS_INTERNAL_ERROR;
    RtlCopyMemory(header->Signature, mac, sizeof(mac));
    return STATUS_SUCCESS;
}

/* A signed response's signature, checked; the message is left as it came. */
BOOLEAN ScSignatureMatches(UCHAR* Message, ULONG Length) {
    SMB2_HEADER* header = (SMB2_HEADER*)Message;
    UCHAR received[16], mac[16];
    BOOLEAN ok;
    RtlCopyMemory(received, header->Signature, sizeof(received));
    RtlZeroMemory(header->Signature, sizeof(header->Signature));
    ok = ScCmac(Message, Length, mac) && RtlCompareMemory(mac, received, sizeof(mac)) == sizeof(mac);
    RtlCopyMemory(header->Signature, received, sizeof(received));
    return ok;
}

/* The same check with the message's length, 4 bytes big-endian (an RFC 1001 session header), before it. */
BOOLEAN ScSignatureMatchesWithLengthPrefix(UCHAR* Message, ULONG Length) {
    SMB2_HEADER* header = (SMB2_HEADER*)Message;
    UCHAR received[16], mac[16], prefix[4];
    BOOLEAN ok;
    prefix[0] = (UCHAR)(Length >> 24), prefix[1] = (UCHAR)(Length >> 16), prefix[2] = (UCHAR)(Length >> 8);
    prefix[3] = (UCHAR)Length;
    RtlCopyMemory(received, header->Signature, sizeof(received));
    RtlZeroMemory(header->Signature, sizeof(header->Signature));
    ok = ScCmac2(prefix, sizeof(prefix), Message, Length, mac) &&
         RtlCompareMemory(mac, received, sizeof(mac)) == sizeof(mac);
    RtlCopyMemory(header->Signature, received, sizeof(received));
    return ok;
}
