/* softndk kernel layer — ipifcons.h: the IANA interface types (IF_TYPE_*) of the WDK (issue 19 §1). */
#ifndef SOFTNDK_KM_IPIFCONS_H
#define SOFTNDK_KM_IPIFCONS_H

#define MIN_IF_TYPE 1
#define IF_TYPE_OTHER 1
#define IF_TYPE_ETHERNET_CSMACD 6 /* softndk's interfaces */
#define IF_TYPE_ISO88025_TOKENRING 9
#define IF_TYPE_PPP 23
#define IF_TYPE_SOFTWARE_LOOPBACK 24
#define IF_TYPE_ATM 37
#define IF_TYPE_IEEE80211 71
#define IF_TYPE_TUNNEL 131
#define IF_TYPE_IEEE1394 144
#define MAX_IF_TYPE 281

#endif /* SOFTNDK_KM_IPIFCONS_H */
