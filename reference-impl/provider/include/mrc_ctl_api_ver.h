/* mrc_ctl_api_ver.h: version numbers of the MRC controller API (mrc_ctl.h), SoftMRC edition.
 *
 * Versioned independently of mrc.h but encoded the same way (MAJOR.MINOR.SUBMINOR in 8, 8
 * and 16 bits). A controller may define MRC_CTL_API_VER_USED before including mrc_ctl.h.
 *
 * Written for this repository from the interface documented by the OCP MRC companion
 * repository; the names and values are the interface, the text is ours.
 */
#ifndef _MRC_CTL_API_VER_H_
#define _MRC_CTL_API_VER_H_

#define MRC_CTL_API_VER_MAJOR_OFFSET 24
#define MRC_CTL_API_VER_MINOR_OFFSET 16
#define MRC_CTL_API_VER_SUBMINOR_OFFSET 0

#define MRC_CTL_API_VER(_major, _minor, _sub_minor)                                          \
  (((_major) << MRC_CTL_API_VER_MAJOR_OFFSET) | ((_minor) << MRC_CTL_API_VER_MINOR_OFFSET) | \
   ((_sub_minor)) << MRC_CTL_API_VER_SUBMINOR_OFFSET)

/* "Whatever the library's current version is." */
#define MRC_CTL_API_VER_LATEST MRC_CTL_API_VER(0xFF, 0xFF, 0xFFFF)

#define MRC_CTL_API_CURRENT_VERSION MRC_CTL_API_VER(1, 0, 1)
#define MRC_CTL_API_LAST_SUPPORTED_VERSION MRC_CTL_API_VER(0, 0, 0)

#ifndef MRC_CTL_API_VER_USED
#define MRC_CTL_API_VER_USED MRC_CTL_API_CURRENT_VERSION
#elif MRC_CTL_API_VER_USED == MRC_CTL_API_VER_LATEST
#undef MRC_CTL_API_VER_USED
#define MRC_CTL_API_VER_USED MRC_CTL_API_CURRENT_VERSION
#endif

/* An application asking for a version this header does not describe must not compile. */
#if MRC_CTL_API_VER_USED > MRC_CTL_API_CURRENT_VERSION
#error "MRC_CTL_API_VER_USED is greater than MRC_CTL_API_CURRENT_VERSION"
#elif MRC_CTL_API_VER_USED < MRC_CTL_API_LAST_SUPPORTED_VERSION
#error "MRC_CTL_API_VER_USED is less than MRC_CTL_API_LAST_SUPPORTED_VERSION"
#elif MRC_CTL_API_VER_USED == MRC_CTL_API_LAST_SUPPORTED_VERSION
#warning "MRC_CTL_API_VER_USED equals MRC_CTL_API_LAST_SUPPORTED_VERSION and may become obsolete"
#endif

/* The provider's own (vendor) API surface, versioned the same way but independently. */
#define MRC_CTL_VENDOR_API_CURRENT_VERSION MRC_CTL_API_VER(1, 0, 0)
#define MRC_CTL_VENDOR_API_LAST_SUPPORTED_VERSION MRC_CTL_API_VER(0, 0, 0)

#ifndef MRC_CTL_VENDOR_API_VER_USED
#define MRC_CTL_VENDOR_API_VER_USED MRC_CTL_VENDOR_API_CURRENT_VERSION
#elif MRC_CTL_VENDOR_API_VER_USED == MRC_CTL_API_VER_LATEST
#undef MRC_CTL_VENDOR_API_VER_USED
#define MRC_CTL_VENDOR_API_VER_USED MRC_CTL_VENDOR_API_CURRENT_VERSION
#endif

#if MRC_CTL_VENDOR_API_VER_USED > MRC_CTL_VENDOR_API_CURRENT_VERSION
#error "MRC_CTL_VENDOR_API_VER_USED is greater than MRC_CTL_VENDOR_API_CURRENT_VERSION"
#elif MRC_CTL_VENDOR_API_VER_USED < MRC_CTL_VENDOR_API_LAST_SUPPORTED_VERSION
#error "MRC_CTL_VENDOR_API_VER_USED is less than MRC_CTL_VENDOR_API_LAST_SUPPORTED_VERSION"
#elif MRC_CTL_VENDOR_API_VER_USED == MRC_CTL_VENDOR_API_LAST_SUPPORTED_VERSION
#warning \
    "MRC_CTL_VENDOR_API_VER_USED equals MRC_CTL_VENDOR_API_LAST_SUPPORTED_VERSION and may become obsolete"
#endif

#endif /* _MRC_CTL_API_VER_H_ */
