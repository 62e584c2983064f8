/* SMB Direct and SMB2 as they go on the wire, for the smbdirect-client sample. References: [MS-SMBD] (SMB2 Remote
 * Direct Memory Access Transport Protocol) §2.2.1 negotiate request, §2.2.2 negotiate response, §2.2.3 data
 * transfer message, §2.2.3.1 buffer descriptor; [MS-SMB2] §2.2.1 header, §2.2.3/4 NEGOTIATE, §2.2.5/6 SESSION_SETUP,
 * §2.2.7 LOGOFF, §2.2.9/10 TREE_CONNECT, §2.2.13/14 CREATE, §2.2.15/16 CLOSE, §2.2.19/20 READ, §2.2.21/22 WRITE;
 * [MS-NLMP] §2.2.1 NTLM messages. Every field is little-endian, as on every platform softndk runs on. */
#pragma once

#include <ntddk.h>

#pragma pack(push, 1)

/* ---- MS-SMBD ---------------------------------------------------------------------------------------------- */

#define SMBD_VERSION_1 0x0100
#define SMBD_RESPONSE_REQUESTED 0x0001 /* §2.2.3 Flags: the peer answers at once, with credits */
#define SMBD_DATA_OFFSET 24            /* the data transfer header, padded to 8 bytes */
#define SMBD_IWARP_PORT 5445           /* [MS-SMBD] §1.9: SMB Direct over iWARP */

typedef struct _SMBD_NEGOTIATE_REQUEST { /* §2.2.1 */
    USHORT MinVersion;
    USHORT MaxVersion;
    USHORT Reserved;
    USHORT CreditsRequested;
    ULONG PreferredSendSize;
    ULONG MaxReceiveSize;
    ULONG MaxFragmentedSize;
} SMBD_NEGOTIATE_REQUEST;

typedef struct _SMBD_NEGOTIATE_RESPONSE { /* §2.2.2 */
    USHORT MinVersion;
    USHORT MaxVersion;
    USHORT NegotiatedVersion;
    USHORT Reserved;
    USHORT CreditsRequested;
    USHORT CreditsGranted;
    ULONG Status;
    ULONG MaxReadWriteSize;
    ULONG PreferredSendSize;
    ULONG MaxReceiveSize;
    ULONG MaxFragmentedSize;
} SMBD_NEGOTIATE_RESPONSE;

typedef struct _SMBD_DATA_HEADER { /* §2.2.3 */
    USHORT CreditsRequested;
    USHORT CreditsGranted;
    USHORT Flags;
    USHORT Reserved;
    ULONG RemainingDataLength; /* bytes of this upper-layer message still to come after this fragment */
    ULONG DataOffset;          /* 0 when DataLength is 0, else a multiple of 8 */
    ULONG DataLength;
    ULONG Padding;
} SMBD_DATA_HEADER;

typedef struct _SMBD_BUFFER_DESCRIPTOR { /* §2.2.3.1: memory the server reaches with RDMA */
    ULONG64 Offset;
    ULONG Token;
    ULONG Length;
} SMBD_BUFFER_DESCRIPTOR;

/* ---- SMB2 ------------------------------------------------------------------------------------------------ */

#define SMB2_NEGOTIATE 0x0000
#define SMB2_SESSION_SETUP 0x0001
#define SMB2_LOGOFF 0x0002
#define SMB2_TREE_CONNECT 0x0003
#define SMB2_TREE_DISCONNECT 0x0004
#define SMB2_CREATE 0x0005
#define SMB2_CLOSE 0x0006
#define SMB2_READ 0x0008
#define SMB2_WRITE 0x0009

#define SMB2_FLAGS_SERVER_TO_REDIR 0x00000001
#define SMB2_FLAGS_ASYNC_COMMAND 0x00000002
#define SMB2_FLAGS_SIGNED 0x00000008

#define SMB2_DIALECT_202 0x0202
#define SMB2_DIALECT_210 0x0210
#define SMB2_DIALECT_300 0x0300
#define SMB2_DIALECT_302 0x0302

#define SMB2_NEGOTIATE_SIGNING_ENABLED 0x0001
#define SMB2_NEGOTIATE_SIGNING_REQUIRED 0x0002
#define SMB2_GLOBAL_CAP_LARGE_MTU 0x00000004 /* multi-credit requests */
#define SMB2_SESSION_FLAG_IS_GUEST 0x0001
#define SMB2_SESSION_FLAG_IS_NULL 0x0002

#define SMB2_CHANNEL_NONE 0x00000000
#define SMB2_CHANNEL_RDMA_V1 0x00000001
#define SMB2_CHANNEL_RDMA_V1_INVALIDATE 0x00000002 /* 3.0.2 and later: the server invalidates the first token */

#define SMB2_CREDIT_UNIT 65536 /* §3.1.5.2: a request charges one credit per 64 KiB it moves */

/* NTSTATUS values an SMB2 server answers with that softndk's headers have no use for elsewhere */
#ifndef STATUS_LOGON_FAILURE
#define STATUS_LOGON_FAILURE ((NTSTATUS)0xC000006DL)
#endif
#ifndef STATUS_BAD_NETWORK_NAME
#define STATUS_BAD_NETWORK_NAME ((NTSTATUS)0xC00000CCL)
#endif
#define SMB2_STATUS_PENDING 0x00000103
#define SMB2_STATUS_MORE_PROCESSING_REQUIRED 0xC0000016

typedef struct _SMB2_HEADER { /* §2.2.1.2, the synchronous form */
    UCHAR ProtocolId[4];      /* 0xFE 'S' 'M' 'B' */
    USHORT StructureSize;     /* 64 */
    USHORT CreditCharge;
    ULONG Status; /* in a request: ChannelSequence and Reserved */
    USHORT Command;
    USHORT Credits; /* CreditRequest or CreditResponse */
    ULONG Flags;
    ULONG NextCommand;
    ULONG64 MessageId;
    ULONG ProcessIdOrAsyncLow; /* async responses: AsyncId spans this and TreeId */
    ULONG TreeId;
    ULONG64 SessionId;
    UCHAR Signature[16];
} SMB2_HEADER;

typedef struct _SMB2_NEGOTIATE_REQUEST { /* §2.2.3 */
    USHORT StructureSize;                /* 36 */
    USHORT DialectCount;
    USHORT SecurityMode;
    USHORT Reserved;
    ULONG Capabilities;
    UCHAR ClientGuid[16];
    ULONG64 ClientStartTime;
    USHORT Dialects[4];
} SMB2_NEGOTIATE_REQUEST;

typedef struct _SMB2_NEGOTIATE_RESPONSE { /* §2.2.4 */
    USHORT StructureSize;                 /* 65 */
    USHORT SecurityMode;
    USHORT DialectRevision;
    USHORT NegotiateContextCount;
    UCHAR ServerGuid[16];
    ULONG Capabilities;
    ULONG MaxTransactSize;
    ULONG MaxReadSize;
    ULONG MaxWriteSize;
    ULONG64 SystemTime;
    ULONG64 ServerStartTime;
    USHORT SecurityBufferOffset;
    USHORT SecurityBufferLength;
    ULONG NegotiateContextOffset;
} SMB2_NEGOTIATE_RESPONSE;

typedef struct _SMB2_SESSION_SETUP_REQUEST { /* §2.2.5 */
    USHORT StructureSize;                    /* 25 */
    UCHAR Flags;
    UCHAR SecurityMode;
    ULONG Capabilities;
    ULONG Channel;
    USHORT SecurityBufferOffset;
    USHORT SecurityBufferLength;
    ULONG64 PreviousSessionId;
} SMB2_SESSION_SETUP_REQUEST;

typedef struct _SMB2_SESSION_SETUP_RESPONSE { /* §2.2.6 */
    USHORT StructureSize;                     /* 9 */
    USHORT SessionFlags;
    USHORT SecurityBufferOffset;
    USHORT SecurityBufferLength;
} SMB2_SESSION_SETUP_RESPONSE;

typedef struct _SMB2_SMALL_REQUEST { /* LOGOFF and TREE_DISCONNECT (§2.2.7, §2.2.11), and their responses */
    USHORT StructureSize;            /* 4 */
    USHORT Reserved;
} SMB2_SMALL_REQUEST;

typedef struct _SMB2_TREE_CONNECT_REQUEST { /* §2.2.9 */
    USHORT StructureSize;                   /* 9 */
    USHORT Flags;
    USHORT PathOffset;
    USHORT PathLength;
} SMB2_TREE_CONNECT_REQUEST;

typedef struct _SMB2_TREE_CONNECT_RESPONSE { /* §2.2.10 */
    USHORT StructureSize;                    /* 16 */
    UCHAR ShareType;
    UCHAR Reserved;
    ULONG ShareFlags;
    ULONG Capabilities;
    ULONG MaximalAccess;
} SMB2_TREE_CONNECT_RESPONSE;

typedef struct _SMB2_FILE_ID {
    ULONG64 Persistent;
    ULONG64 Volatile;
} SMB2_FILE_ID;

typedef struct _SMB2_CREATE_REQUEST { /* §2.2.13 */
    USHORT StructureSize;             /* 57 */
    UCHAR SecurityFlags;
    UCHAR RequestedOplockLevel;
    ULONG ImpersonationLevel;
    ULONG64 SmbCreateFlags;
    ULONG64 Reserved;
    ULONG DesiredAccess;
    ULONG FileAttributes;
    ULONG ShareAccess;
    ULONG CreateDisposition;
    ULONG CreateOptions;
    USHORT NameOffset;
    USHORT NameLength;
    ULONG CreateContextsOffset;
    ULONG CreateContextsLength;
} SMB2_CREATE_REQUEST;

typedef struct _SMB2_CREATE_RESPONSE { /* §2.2.14 */
    USHORT StructureSize;              /* 89 */
    UCHAR OplockLevel;
    UCHAR Flags;
    ULONG CreateAction;
    ULONG64 Times[4];
    ULONG64 AllocationSize;
    ULONG64 EndOfFile;
    ULONG FileAttributes;
    ULONG Reserved2;
    SMB2_FILE_ID FileId;
    ULONG CreateContextsOffset;
    ULONG CreateContextsLength;
} SMB2_CREATE_RESPONSE;

typedef struct _SMB2_CLOSE_REQUEST { /* §2.2.15 */
    USHORT StructureSize;            /* 24 */
    USHORT Flags;
    ULONG Reserved;
    SMB2_FILE_ID FileId;
} SMB2_CLOSE_REQUEST;

typedef struct _SMB2_READ_REQUEST { /* §2.2.19 */
    USHORT StructureSize;           /* 49 */
    UCHAR Padding;
    UCHAR Flags;
    ULONG Length;
    ULONG64 Offset;
    SMB2_FILE_ID FileId;
    ULONG MinimumCount;
    ULONG Channel;
    ULONG RemainingBytes;
    USHORT ReadChannelInfoOffset;
    USHORT ReadChannelInfoLength;
} SMB2_READ_REQUEST;

typedef struct _SMB2_READ_RESPONSE { /* §2.2.20 */
    USHORT StructureSize;            /* 17 */
    UCHAR DataOffset;
    UCHAR Reserved;
    ULONG DataLength;
    ULONG DataRemaining;
    ULONG Reserved2;
} SMB2_READ_RESPONSE;

typedef struct _SMB2_WRITE_REQUEST { /* §2.2.21 */
    USHORT StructureSize;            /* 49 */
    USHORT DataOffset;
    ULONG Length;
    ULONG64 Offset;
    SMB2_FILE_ID FileId;
    ULONG Channel;
    ULONG RemainingBytes;
    USHORT WriteChannelInfoOffset;
    USHORT WriteChannelInfoLength;
    ULONG Flags;
} SMB2_WRITE_REQUEST;

typedef struct _SMB2_WRITE_RESPONSE { /* §2.2.22 */
    USHORT StructureSize;             /* 17 */
    USHORT Reserved;
    ULONG Count;
    ULONG Remaining;
    USHORT WriteChannelInfoOffset;
    USHORT WriteChannelInfoLength;
} SMB2_WRITE_RESPONSE;

/* ---- NTLMSSP (MS-NLMP §2.2.1) ------------------------------------------------------------------------------ */

#define NTLMSSP_NEGOTIATE_UNICODE 0x00000001
#define NTLMSSP_REQUEST_TARGET 0x00000004
#define NTLMSSP_NEGOTIATE_SIGN 0x00000010
#define NTLMSSP_NEGOTIATE_NTLM 0x00000200
#define NTLMSSP_NEGOTIATE_ANONYMOUS 0x00000800
#define NTLMSSP_NEGOTIATE_ALWAYS_SIGN 0x00008000
#define NTLMSSP_NEGOTIATE_EXTENDED_SESSIONSECURITY 0x00080000
#define NTLMSSP_NEGOTIATE_TARGET_INFO 0x00800000
#define NTLMSSP_NEGOTIATE_128 0x20000000
#define NTLMSSP_NEGOTIATE_KEY_EXCH 0x40000000

typedef struct _NTLM_FIELD {
    USHORT Length;
    USHORT MaxLength;
    ULONG Offset;
} NTLM_FIELD;

typedef struct _NTLM_NEGOTIATE { /* §2.2.1.1 */
    UCHAR Signature[8];          /* "NTLMSSP\0" */
    ULONG MessageType;           /* 1 */
    ULONG NegotiateFlags;
    NTLM_FIELD DomainName;
    NTLM_FIELD Workstation;
} NTLM_NEGOTIATE;

typedef struct _NTLM_CHALLENGE { /* §2.2.1.2 */
    UCHAR Signature[8];
    ULONG MessageType; /* 2 */
    NTLM_FIELD TargetName;
    ULONG NegotiateFlags;
    UCHAR ServerChallenge[8];
    UCHAR Reserved[8];
    NTLM_FIELD TargetInfo;
} NTLM_CHALLENGE;

typedef struct _NTLM_AUTHENTICATE { /* §2.2.1.3, without Version and MIC */
    UCHAR Signature[8];
    ULONG MessageType; /* 3 */
    NTLM_FIELD LmChallengeResponse;
    NTLM_FIELD NtChallengeResponse;
    NTLM_FIELD DomainName;
    NTLM_FIELD UserName;
    NTLM_FIELD Workstation;
    NTLM_FIELD EncryptedRandomSessionKey;
    ULONG NegotiateFlags;
} NTLM_AUTHENTICATE;

#pragma pack(pop)

C_ASSERT(sizeof(SMBD_NEGOTIATE_REQUEST) == 20);
C_ASSERT(sizeof(SMBD_NEGOTIATE_RESPONSE) == 32);
C_ASSERT(sizeof(SMBD_DATA_HEADER) == SMBD_DATA_OFFSET);
C_ASSERT(sizeof(SMBD_BUFFER_DESCRIPTOR) == 16);
C_ASSERT(sizeof(SMB2_HEADER) == 64);
C_ASSERT(sizeof(SMB2_NEGOTIATE_REQUEST) == 36 + 8);
C_ASSERT(sizeof(SMB2_NEGOTIATE_RESPONSE) == 64);
C_ASSERT(sizeof(SMB2_SESSION_SETUP_REQUEST) == 24);
C_ASSERT(sizeof(SMB2_CREATE_REQUEST) == 56);
C_ASSERT(sizeof(SMB2_CREATE_RESPONSE) == 88);
C_ASSERT(sizeof(SMB2_READ_REQUEST) == 48);
C_ASSERT(sizeof(SMB2_WRITE_REQUEST) == 48);
C_ASSERT(sizeof(SMB2_READ_RESPONSE) == 16);
C_ASSERT(sizeof(SMB2_WRITE_RESPONSE) == 16);
C_ASSERT(sizeof(NTLM_AUTHENTICATE) == 64);
