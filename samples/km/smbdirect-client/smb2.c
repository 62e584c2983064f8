/*++

Module Name:

    smb2.c

Abstract:

    smbdirect-client's SMB2 requests over MS-SMBD, one at a time: NEGOTIATE (dialects 2.0.2 to 3.0.2), a guest
    SESSION_SETUP with raw NTLMSSP, TREE_CONNECT, CREATE, READ and WRITE with RDMA channels (the data moves by the
    server's RDMA Write into, or RDMA Read from, buffers fast-registered for the one I/O), CLOSE, TREE_DISCONNECT
    and LOGOFF. Credits ([MS-SMB2] §3.2.4.1.5): a request charges one credit per 64 KiB it moves, its MessageId
    advances by the charge, and each request asks for SC_SMB2_CREDITS_WANTED more.

Environment:

    Kernel mode (softndk kernel layer). Everything here runs at PASSIVE_LEVEL in the client worker.

--*/

#include "smbdirect_client.h"

/* one request: the fixed part and its tail, up to an inline WRITE of SC_MAX_INLINE bytes */
static UCHAR g_Request[sizeof(SMB2_HEADER) + sizeof(SMB2_WRITE_REQUEST) + SC_MAX_INLINE];

/* SMB2 and NTLM carry UTF-16LE. softndk's WCHAR is wchar_t, 32 bits on Linux (include/softndk/km/ntdef.h), so a
 * string goes on the wire through this: each character below U+10000 as one 16-bit unit. Returns the bytes. */
static ULONG ScToUtf16(PCWSTR Text, USHORT* Out, ULONG OutUnits) {
    ULONG n = 0;
    while (Text[n] != 0 && n < OutUnits) {
        Out[n] = (USHORT)Text[n];
        ++n;
    }
    return n * sizeof(USHORT);
}

static USHORT ScChargeOf(ULONG Bytes) {
    return (USHORT)(Bytes <= SMB2_CREDIT_UNIT ? 1 : (Bytes + SMB2_CREDIT_UNIT - 1) / SMB2_CREDIT_UNIT);
}

/* One request and its final response (an interim STATUS_PENDING answer is waited past). *Body points at the
 * response's body, valid until the next request; *SmbStatus is the response's status. */
static NTSTATUS ScTransact(USHORT Command, const VOID* Fixed, ULONG FixedLength, const VOID* Tail, ULONG TailLength,
                           USHORT Charge, PUCHAR* Body, PULONG BodyLength, PULONG SmbStatus) {
    SMB2_HEADER* header = (SMB2_HEADER*)g_Request;
    ULONG length = sizeof(*header) + FixedLength + TailLength, consumed = Charge == 0 ? 1 : Charge;
    ULONG64 id = g_Sc.NextMessageId;
    PUCHAR message;
    ULONG messageLength;
    NTSTATUS status;
    PAGED_CODE();
    if (length > sizeof(g_Request)) return STATUS_INVALID_PARAMETER;
    if (g_Sc.Smb2Credits < consumed) {
        ScLog("smbdirect-client: SMB2 command %u charges %u credits, and the server granted %u\n", Command, consumed,
              g_Sc.Smb2Credits);
        return STATUS_DEVICE_BUSY;
    }
    RtlZeroMemory(header, sizeof(*header));
    header->ProtocolId[0] = 0xFE;
    header->ProtocolId[1] = 'S';
    header->ProtocolId[2] = 'M';
    header->ProtocolId[3] = 'B';
    header->StructureSize = 64;
    header->CreditCharge = Charge;
    header->Command = Command;
    header->Credits = SC_SMB2_CREDITS_WANTED;
    header->MessageId = id;
    header->TreeId = g_Sc.TreeId;
    header->SessionId = g_Sc.SessionId;
    RtlCopyMemory(g_Request + sizeof(*header), Fixed, FixedLength);
    if (TailLength != 0) RtlCopyMemory(g_Request + sizeof(*header) + FixedLength, Tail, TailLength);
    g_Sc.NextMessageId += consumed;
    g_Sc.Smb2Credits -= consumed;
    if (g_Sc.Signing) { /* [MS-SMB2] §3.2.4.1.1: every request of a signed session */
        status = ScSign(g_Request, length);
        if (!NT_SUCCESS(status)) return status;
        ++g_Sc.RequestsSigned;
    }
    status = ScSendMessage(g_Request, length);
    if (!NT_SUCCESS(status)) return status;
    for (;;) {
        const SMB2_HEADER* response;
        status = ScReceiveMessage(&message, &messageLength);
        if (!NT_SUCCESS(status)) return status;
        response = (const SMB2_HEADER*)message;
        if (messageLength < sizeof(SMB2_HEADER) + 2 || message[0] != 0xFE || message[1] != 'S' || message[2] != 'M' ||
            message[3] != 'B' || response->StructureSize != 64 || !(response->Flags & SMB2_FLAGS_SERVER_TO_REDIR)) {
            ScLog("smbdirect-client: a message of %u bytes that is no SMB2 response\n", messageLength);
            return ScProtocolError(__LINE__);
        }
        if (response->MessageId != id || response->Command != Command) {
            ScLog("smbdirect-client: a response to message %llu (command %u); ours is %llu (command %u)\n",
                  (unsigned long long)response->MessageId, response->Command, (unsigned long long)id, Command);
            return ScProtocolError(__LINE__);
        }
        g_Sc.Smb2Credits += response->Credits;
        if ((response->Flags & SMB2_FLAGS_ASYNC_COMMAND) && response->Status == SMB2_STATUS_PENDING) continue;
        /* §3.2.5.1.3: a signed response is checked with the session's key; a signed session takes no other */
        if (response->Flags & SMB2_FLAGS_SIGNED) {
            /* Linux 6.1's ksmbd signs a READ response that carried its data by RDMA over its 4-byte RFC 1001
             * length prefix too (smb3_set_sign_rsp takes two iovs for every READ): still a MAC of this message
             * under the session's key, accepted, counted and reported (docs/spec-decisions.md) */
            BOOLEAN prefixed = FALSE;
            if (g_Sc.SigningKeyReady && !ScSignatureMatches(message, messageLength) && Command == SMB2_READ &&
                ScSignatureMatchesWithLengthPrefix(message, messageLength)) {
                prefixed = TRUE;
                ++g_Sc.ReadSignaturesWithPrefix;
            }
            if (!g_Sc.SigningKeyReady || (!prefixed && !ScSignatureMatches(message, messageLength))) {
                ScLog(
                    "smbdirect-client: the signature of the response to command %u does not match: "
                    "STATUS_ACCESS_DENIED\n",
                    Command);
                return STATUS_ACCESS_DENIED;
            }
            ++g_Sc.SignaturesVerified;
        } else if (g_Sc.Signing) {
            ScLog("smbdirect-client: an unsigned response to command %u in a signed session\n", Command);
            return ScProtocolError(__LINE__);
        }
        if (Command == SMB2_SESSION_SETUP) g_Sc.SessionId = response->SessionId;
        if (Command == SMB2_TREE_CONNECT) g_Sc.TreeId = response->TreeId;
        *SmbStatus = response->Status;
        *Body = message + sizeof(SMB2_HEADER);
        *BodyLength = messageLength - sizeof(SMB2_HEADER);
        return STATUS_SUCCESS;
    }
}

/* The response's status, said in words when it is not success. */
static NTSTATUS ScExpect(PCSTR What, NTSTATUS Transport, ULONG SmbStatus, ULONG Wanted) {
    if (!NT_SUCCESS(Transport)) return Transport;
    if (SmbStatus == Wanted) return STATUS_SUCCESS;
    ScLog("smbdirect-client: %s: the server answered 0x%08X (%s)\n", What, SmbStatus,
          ScStatusText((NTSTATUS)SmbStatus));
    return NT_SUCCESS((NTSTATUS)SmbStatus) ? ScProtocolError(__LINE__) : (NTSTATUS)SmbStatus;
}

NTSTATUS ScSmb2Negotiate(void) {
    SMB2_NEGOTIATE_REQUEST request;
    SMB2_NEGOTIATE_RESPONSE response;
    PUCHAR body;
    ULONG length, smbStatus, i;
    NTSTATUS status;
    RtlZeroMemory(&request, sizeof(request));
    request.StructureSize = 36;
    request.DialectCount = 4;
    request.SecurityMode = SMB2_NEGOTIATE_SIGNING_ENABLED;
    request.Capabilities = SMB2_GLOBAL_CAP_LARGE_MTU;
    for (i = 0; i < sizeof(request.ClientGuid); ++i) request.ClientGuid[i] = (UCHAR)(0x5D + 11 * i);
    request.Dialects[0] = SMB2_DIALECT_202;
    request.Dialects[1] = SMB2_DIALECT_210;
    request.Dialects[2] = SMB2_DIALECT_300;
    request.Dialects[3] = SMB2_DIALECT_302;
    g_Sc.Smb2Credits = 1; /* §3.2.5.1: a connection starts with one */
    status = ScTransact(SMB2_NEGOTIATE, &request, sizeof(request), NULL, 0, 0, &body, &length, &smbStatus);
    status = ScExpect("NEGOTIATE", status, smbStatus, 0);
    if (!NT_SUCCESS(status)) return status;
    if (length < sizeof(response)) return ScProtocolError(__LINE__);
    RtlCopyMemory(&response, body, sizeof(response));
    g_Sc.Dialect = response.DialectRevision;
    g_Sc.MaxRead = response.MaxReadSize;
    g_Sc.MaxWrite = response.MaxWriteSize;
    ScLog(
        "smbdirect-client:   dialect 0x%04X, security mode 0x%X, capabilities 0x%X, largest read %u and write %u, "
        "%u credits\n",
        g_Sc.Dialect, response.SecurityMode, response.Capabilities, g_Sc.MaxRead, g_Sc.MaxWrite, g_Sc.Smb2Credits);
    /* [MS-SMB2] §2.2.19: RDMA channels exist from 3.0; multi-credit requests need LARGE_MTU */
    if (g_Sc.Dialect < SMB2_DIALECT_300 || !(response.Capabilities & SMB2_GLOBAL_CAP_LARGE_MTU)) {
        ScLog("smbdirect-client: dialect 0x%04X without large MTU carries no RDMA channel: STATUS_NOT_SUPPORTED\n",
              g_Sc.Dialect);
        return STATUS_NOT_SUPPORTED;
    }
    if (response.SecurityMode & SMB2_NEGOTIATE_SIGNING_REQUIRED)
        ScLog(
            "smbdirect-client:   the server requires signing; a guest session is not signed ([MS-SMB2] §3.2.5.3.1)\n");
    return STATUS_SUCCESS;
}

/* NTLMSSP NEGOTIATE, the server's CHALLENGE, then an AUTHENTICATE. With User: its NTLMv2 response (ntlm.c), the
 * session key and the signing key; the final response must come signed with it, and every message after is
 * signed. Without: a guest session, an AUTHENTICATE for an account the server does not know, with empty
 * responses, which a server that maps unknown users to its guest account accepts; nothing is signed. */
NTSTATUS ScSmb2SessionSetup(void) {
    static const WCHAR guest[] = L"softndk-guest";
    union {
        struct {
            NTLM_AUTHENTICATE Message;
            USHORT User[sizeof(guest) / sizeof(WCHAR)];
        } guest;
        UCHAR user[600];
    } authenticate;
    SMB2_SESSION_SETUP_REQUEST request;
    SMB2_SESSION_SETUP_RESPONSE response;
    NTLM_NEGOTIATE negotiate;
    const NTLM_CHALLENGE* challenge;
    ULONG flags = NTLMSSP_NEGOTIATE_UNICODE | NTLMSSP_REQUEST_TARGET | NTLMSSP_NEGOTIATE_NTLM |
                  NTLMSSP_NEGOTIATE_ALWAYS_SIGN | NTLMSSP_NEGOTIATE_EXTENDED_SESSIONSECURITY | NTLMSSP_NEGOTIATE_128;
    ULONG end = sizeof(NTLM_AUTHENTICATE), userBytes;
    PUCHAR body;
    ULONG length, smbStatus, verified;
    BOOLEAN user = g_Sc.User[0] != 0;
    NTSTATUS status;
    RtlZeroMemory(&negotiate, sizeof(negotiate));
    RtlCopyMemory(negotiate.Signature, "NTLMSSP", 8);
    negotiate.MessageType = 1;
    negotiate.NegotiateFlags = flags;
    RtlZeroMemory(&request, sizeof(request));
    request.StructureSize = 25;
    request.SecurityMode =
        (UCHAR)(SMB2_NEGOTIATE_SIGNING_ENABLED | (user ? SMB2_NEGOTIATE_SIGNING_REQUIRED : 0)); /* §2.2.5 */
    request.SecurityBufferOffset = sizeof(SMB2_HEADER) + sizeof(request);
    request.SecurityBufferLength = sizeof(negotiate);
    status = ScTransact(SMB2_SESSION_SETUP, &request, sizeof(request), &negotiate, sizeof(negotiate), 1, &body, &length,
                        &smbStatus);
    status = ScExpect("SESSION_SETUP (NTLMSSP NEGOTIATE)", status, smbStatus, SMB2_STATUS_MORE_PROCESSING_REQUIRED);
    if (!NT_SUCCESS(status)) return status;
    RtlCopyMemory(&response, body, sizeof(response));
    if (length < sizeof(response) || response.SecurityBufferOffset < sizeof(SMB2_HEADER) + sizeof(response) ||
        response.SecurityBufferOffset - sizeof(SMB2_HEADER) + (ULONG)response.SecurityBufferLength > length ||
        response.SecurityBufferLength < sizeof(NTLM_CHALLENGE))
        return ScProtocolError(__LINE__);
    challenge = (const NTLM_CHALLENGE*)(body + response.SecurityBufferOffset - sizeof(SMB2_HEADER));
    if (RtlCompareMemory(challenge->Signature, "NTLMSSP", 8) != 8 || challenge->MessageType != 2) {
        ScLog("smbdirect-client: the server's security blob is no NTLMSSP CHALLENGE (SPNEGO is not spoken here)\n");
        return ScProtocolError(__LINE__);
    }
    RtlZeroMemory(&authenticate, sizeof(authenticate));
    if (user) {
        end = sizeof(authenticate.user);
        status = ScNtlmAuthenticate((const UCHAR*)challenge, response.SecurityBufferLength,
                                    flags & challenge->NegotiateFlags, authenticate.user, &end);
        if (!NT_SUCCESS(status)) return status;
    } else {
        RtlCopyMemory(authenticate.guest.Message.Signature, "NTLMSSP", 8);
        authenticate.guest.Message.MessageType = 3;
        authenticate.guest.Message.NegotiateFlags = flags & challenge->NegotiateFlags;
        userBytes = ScToUtf16(guest, authenticate.guest.User, sizeof(authenticate.guest.User) / sizeof(USHORT));
        authenticate.guest.Message.UserName.Length = authenticate.guest.Message.UserName.MaxLength = (USHORT)userBytes;
        authenticate.guest.Message.UserName.Offset = end;
        end += userBytes; /* every other field is empty and points at the end */
        authenticate.guest.Message.LmChallengeResponse.Offset = end;
        authenticate.guest.Message.NtChallengeResponse.Offset = end;
        authenticate.guest.Message.DomainName.Offset = authenticate.guest.Message.Workstation.Offset = end;
        authenticate.guest.Message.EncryptedRandomSessionKey.Offset = end;
    }
    request.SecurityBufferLength = (USHORT)end;
    verified = g_Sc.SignaturesVerified;
    status =
        ScTransact(SMB2_SESSION_SETUP, &request, sizeof(request), &authenticate, end, 1, &body, &length, &smbStatus);
    status = ScExpect("SESSION_SETUP (NTLMSSP AUTHENTICATE)", status, smbStatus, 0);
    if (!NT_SUCCESS(status)) return status;
    if (length < sizeof(response)) return ScProtocolError(__LINE__);
    RtlCopyMemory(&response, body, sizeof(response));
    g_Sc.SessionFlags = response.SessionFlags;
    if (user) {
        /* §3.2.5.3.1: a user session (not guest, not anonymous) is signed from here on; its final response was */
        if (g_Sc.SessionFlags & (SMB2_SESSION_FLAG_IS_GUEST | SMB2_SESSION_FLAG_IS_NULL)) {
            ScLog("smbdirect-client: user %s got a %s session: STATUS_LOGON_FAILURE\n", g_Sc.User,
                  (g_Sc.SessionFlags & SMB2_SESSION_FLAG_IS_GUEST) ? "guest" : "anonymous");
            return STATUS_LOGON_FAILURE;
        }
        if (g_Sc.SignaturesVerified == verified) {
            ScLog("smbdirect-client: the final SESSION_SETUP response is not signed\n");
            return ScProtocolError(__LINE__);
        }
        g_Sc.Signing = TRUE;
    }
    ScLog("smbdirect-client:   session 0x%llX, flags 0x%X (%s), %u credits\n", (unsigned long long)g_Sc.SessionId,
          g_Sc.SessionFlags,
          (g_Sc.SessionFlags & SMB2_SESSION_FLAG_IS_GUEST)  ? "guest"
          : (g_Sc.SessionFlags & SMB2_SESSION_FLAG_IS_NULL) ? "anonymous"
                                                            : "user",
          g_Sc.Smb2Credits);
    return STATUS_SUCCESS;
}

NTSTATUS ScSmb2TreeConnect(void) {
    SMB2_TREE_CONNECT_REQUEST request;
    SMB2_TREE_CONNECT_RESPONSE response;
    WCHAR path[96], address[20];
    USHORT wire[96];
    PUCHAR body;
    ULONG length, smbStatus, bytes;
    NTSTATUS status;
    RtlIpv4AddressToStringW(&g_Sc.Address, address);
    status = RtlStringCbPrintfW(path, sizeof(path), L"\\\\%ls\\%ls", address, g_Sc.Share);
    if (!NT_SUCCESS(status)) return status;
    bytes = ScToUtf16(path, wire, sizeof(wire) / sizeof(USHORT));
    RtlZeroMemory(&request, sizeof(request));
    request.StructureSize = 9;
    request.PathOffset = sizeof(SMB2_HEADER) + sizeof(request);
    request.PathLength = (USHORT)bytes;
    status = ScTransact(SMB2_TREE_CONNECT, &request, sizeof(request), wire, bytes, 1, &body, &length, &smbStatus);
    status = ScExpect("TREE_CONNECT", status, smbStatus, 0);
    if (!NT_SUCCESS(status)) return status;
    if (length < sizeof(response)) return ScProtocolError(__LINE__);
    RtlCopyMemory(&response, body, sizeof(response));
    ScLog("smbdirect-client:   %ls: tree 0x%X, share type %u, flags 0x%X, maximal access 0x%08X\n", path, g_Sc.TreeId,
          response.ShareType, response.ShareFlags, response.MaximalAccess);
    return STATUS_SUCCESS;
}

NTSTATUS ScSmb2Create(PCWSTR Name, SMB2_FILE_ID* File) {
    SMB2_CREATE_REQUEST request;
    SMB2_CREATE_RESPONSE response;
    USHORT wire[64];
    PUCHAR body;
    ULONG length, smbStatus, bytes = ScToUtf16(Name, wire, sizeof(wire) / sizeof(USHORT));
    NTSTATUS status;
    RtlZeroMemory(&request, sizeof(request));
    request.StructureSize = 57;
    request.ImpersonationLevel = 2;     /* impersonation */
    request.DesiredAccess = 0x0012019F; /* FILE_GENERIC_READ | FILE_GENERIC_WRITE */
    request.FileAttributes = 0x80;      /* FILE_ATTRIBUTE_NORMAL */
    request.ShareAccess = 7;            /* read, write, delete */
    request.CreateDisposition = 5;      /* FILE_OVERWRITE_IF: a fresh, empty file each run */
    request.CreateOptions = 0x40;       /* FILE_NON_DIRECTORY_FILE */
    request.NameOffset = sizeof(SMB2_HEADER) + sizeof(request);
    request.NameLength = (USHORT)bytes;
    status = ScTransact(SMB2_CREATE, &request, sizeof(request), wire, bytes, 1, &body, &length, &smbStatus);
    status = ScExpect("CREATE", status, smbStatus, 0);
    if (!NT_SUCCESS(status)) return status;
    if (length < sizeof(response)) return ScProtocolError(__LINE__);
    RtlCopyMemory(&response, body, sizeof(response));
    *File = response.FileId;
    return STATUS_SUCCESS;
}

/* Channel and descriptors for an I/O over the data buffer; RDMA_V1_INVALIDATE asks the server to invalidate the
 * first descriptor's token with its response (3.0.2 and later). */
static ULONG ScChannel(BOOLEAN Invalidate) {
    return Invalidate && g_Sc.Dialect >= SMB2_DIALECT_302 ? SMB2_CHANNEL_RDMA_V1_INVALIDATE : SMB2_CHANNEL_RDMA_V1;
}

/* After the response: the first MR was invalidated by the server when asked, and every other one is ours to. */
static NTSTATUS ScFinishIo(ULONG Channel, UINT32 FirstToken) {
    if (Channel == SMB2_CHANNEL_RDMA_V1_INVALIDATE && g_Sc.LastInvalidatedToken != FirstToken) {
        ScLog("smbdirect-client: the server did not invalidate token 0x%08X as asked\n", FirstToken);
        return ScProtocolError(__LINE__);
    }
    return ScInvalidateRemaining();
}

NTSTATUS ScSmb2Write(const SMB2_FILE_ID* File, ULONG64 Offset, ULONG Length, BOOLEAN Invalidate) {
    SMBD_BUFFER_DESCRIPTOR descriptors[SC_MAX_MRS];
    SMB2_WRITE_REQUEST request;
    SMB2_WRITE_RESPONSE response;
    PUCHAR body;
    ULONG count = 0, length, smbStatus;
    NTSTATUS status = ScRegister(Length, FALSE, descriptors, &count);
    if (!NT_SUCCESS(status)) return status;
    RtlZeroMemory(&request, sizeof(request));
    request.StructureSize = 49;
    request.DataOffset = 0; /* the data is not in the message: Length 0, RemainingBytes says how much */
    request.Offset = Offset;
    request.FileId = *File;
    request.Channel = ScChannel(Invalidate);
    request.RemainingBytes = Length;
    request.WriteChannelInfoOffset = sizeof(SMB2_HEADER) + sizeof(request);
    request.WriteChannelInfoLength = (USHORT)(count * sizeof(SMBD_BUFFER_DESCRIPTOR));
    g_Sc.LastInvalidatedToken = 0;
    status = ScTransact(SMB2_WRITE, &request, sizeof(request), descriptors, count * sizeof(SMBD_BUFFER_DESCRIPTOR),
                        ScChargeOf(Length), &body, &length, &smbStatus);
    status = ScExpect("WRITE", status, smbStatus, 0);
    if (NT_SUCCESS(status)) status = ScFinishIo(request.Channel, descriptors[0].Token);
    if (!NT_SUCCESS(status)) return status;
    if (length < sizeof(response)) return ScProtocolError(__LINE__);
    RtlCopyMemory(&response, body, sizeof(response));
    if (response.Count != Length) {
        ScLog("smbdirect-client: WRITE of %u bytes at %llu: the server wrote %u\n", Length, (unsigned long long)Offset,
              response.Count);
        return STATUS_DATA_ERROR;
    }
    ++g_Sc.RdmaReads; /* the server's */
    g_Sc.BytesWritten += Length;
    return STATUS_SUCCESS;
}

NTSTATUS ScSmb2Read(const SMB2_FILE_ID* File, ULONG64 Offset, ULONG Length, BOOLEAN Invalidate) {
    SMBD_BUFFER_DESCRIPTOR descriptors[SC_MAX_MRS];
    SMB2_READ_REQUEST request;
    SMB2_READ_RESPONSE response;
    PUCHAR body;
    ULONG count = 0, length, smbStatus;
    NTSTATUS status = ScRegister(Length, TRUE, descriptors, &count);
    if (!NT_SUCCESS(status)) return status;
    RtlZeroMemory(&request, sizeof(request));
    request.StructureSize = 49;
    request.Padding = 0x50;
    request.Length = Length;
    request.Offset = Offset;
    request.FileId = *File;
    request.MinimumCount = Length;
    request.Channel = ScChannel(Invalidate);
    request.ReadChannelInfoOffset = sizeof(SMB2_HEADER) + sizeof(request);
    request.ReadChannelInfoLength = (USHORT)(count * sizeof(SMBD_BUFFER_DESCRIPTOR));
    g_Sc.LastInvalidatedToken = 0;
    status = ScTransact(SMB2_READ, &request, sizeof(request), descriptors, count * sizeof(SMBD_BUFFER_DESCRIPTOR),
                        ScChargeOf(Length), &body, &length, &smbStatus);
    status = ScExpect("READ", status, smbStatus, 0);
    if (NT_SUCCESS(status)) status = ScFinishIo(request.Channel, descriptors[0].Token);
    if (!NT_SUCCESS(status)) return status;
    if (length < sizeof(response)) return ScProtocolError(__LINE__);
    RtlCopyMemory(&response, body, sizeof(response));
    /* the data came by RDMA Write: none in the message, all of it "remaining" */
    if (response.DataLength != 0 || response.DataRemaining != Length) {
        ScLog("smbdirect-client: READ of %u bytes at %llu: %u bytes in the message, %u by RDMA\n", Length,
              (unsigned long long)Offset, response.DataLength, response.DataRemaining);
        return STATUS_DATA_ERROR;
    }
    ++g_Sc.RdmaWrites; /* the server's */
    g_Sc.BytesRead += Length;
    return STATUS_SUCCESS;
}

/* WRITE and READ with the data in the messages (Channel NONE): a message longer than the server's receive size
 * goes in fragments, and a response longer than it comes in fragments to reassemble (MS-SMBD §3.1.5.7-8). */
NTSTATUS ScSmb2WriteInline(const SMB2_FILE_ID* File, ULONG64 Offset, const UCHAR* Data, ULONG Length) {
    SMB2_WRITE_REQUEST request;
    SMB2_WRITE_RESPONSE response;
    PUCHAR body;
    ULONG length, smbStatus;
    NTSTATUS status;
    if (Length == 0 || Length > SC_MAX_INLINE) return STATUS_INVALID_PARAMETER;
    RtlZeroMemory(&request, sizeof(request));
    request.StructureSize = 49;
    request.DataOffset = sizeof(SMB2_HEADER) + sizeof(request);
    request.Length = Length;
    request.Offset = Offset;
    request.FileId = *File;
    request.Channel = SMB2_CHANNEL_NONE;
    status =
        ScTransact(SMB2_WRITE, &request, sizeof(request), Data, Length, ScChargeOf(Length), &body, &length, &smbStatus);
    status = ScExpect("WRITE (inline)", status, smbStatus, 0);
    if (!NT_SUCCESS(status)) return status;
    if (length < sizeof(response)) return ScProtocolError(__LINE__);
    RtlCopyMemory(&response, body, sizeof(response));
    if (response.Count != Length) return STATUS_DATA_ERROR;
    g_Sc.BytesWritten += Length;
    return STATUS_SUCCESS;
}

NTSTATUS ScSmb2ReadInline(const SMB2_FILE_ID* File, ULONG64 Offset, UCHAR* Data, ULONG Length) {
    SMB2_READ_REQUEST request;
    SMB2_READ_RESPONSE response;
    UCHAR pad = 0;
    PUCHAR body;
    ULONG length, smbStatus;
    NTSTATUS status;
    if (Length == 0 || Length > SC_MAX_INLINE) return STATUS_INVALID_PARAMETER;
    RtlZeroMemory(&request, sizeof(request));
    request.StructureSize = 49;
    request.Padding = 0x50;
    request.Length = Length;
    request.Offset = Offset;
    request.FileId = *File;
    request.MinimumCount = Length;
    request.Channel = SMB2_CHANNEL_NONE;
    status = ScTransact(SMB2_READ, &request, sizeof(request), &pad, 1, ScChargeOf(Length), &body, &length, &smbStatus);
    status = ScExpect("READ (inline)", status, smbStatus, 0);
    if (!NT_SUCCESS(status)) return status;
    if (length < sizeof(response)) return ScProtocolError(__LINE__);
    RtlCopyMemory(&response, body, sizeof(response));
    /* the data sits at DataOffset from the header's start, all of it in this message */
    if (response.DataLength != Length || response.DataOffset < sizeof(SMB2_HEADER) + sizeof(response) ||
        response.DataOffset - sizeof(SMB2_HEADER) + (ULONG64)Length > length) {
        ScLog("smbdirect-client: READ (inline) of %u bytes: %u bytes at offset %u of a %u-byte response\n", Length,
              response.DataLength, response.DataOffset, length + (ULONG)sizeof(SMB2_HEADER));
        return STATUS_DATA_ERROR;
    }
    RtlCopyMemory(Data, body + response.DataOffset - sizeof(SMB2_HEADER), Length);
    g_Sc.BytesRead += Length;
    return STATUS_SUCCESS;
}

NTSTATUS ScSmb2Close(const SMB2_FILE_ID* File) {
    SMB2_CLOSE_REQUEST request;
    PUCHAR body;
    ULONG length, smbStatus;
    NTSTATUS status;
    RtlZeroMemory(&request, sizeof(request));
    request.StructureSize = 24;
    request.FileId = *File;
    status = ScTransact(SMB2_CLOSE, &request, sizeof(request), NULL, 0, 1, &body, &length, &smbStatus);
    return ScExpect("CLOSE", status, smbStatus, 0);
}

static NTSTATUS ScSmall(USHORT Command, PCSTR What) {
    SMB2_SMALL_REQUEST request = {4, 0};
    PUCHAR body;
    ULONG length, smbStatus;
    NTSTATUS status = ScTransact(Command, &request, sizeof(request), NULL, 0, 1, &body, &length, &smbStatus);
    return ScExpect(What, status, smbStatus, 0);
}

NTSTATUS ScSmb2TreeDisconnect(void) {
    NTSTATUS status = ScSmall(SMB2_TREE_DISCONNECT, "TREE_DISCONNECT");
    g_Sc.TreeId = 0;
    return status;
}

NTSTATUS ScSmb2Logoff(void) {
    NTSTATUS status = ScSmall(SMB2_LOGOFF, "LOGOFF");
    g_Sc.SessionId = 0;
    return status;
}
