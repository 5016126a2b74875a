/* mrc_api_ver.h: version numbers of the MRC application API (mrc.h), SoftMRC edition.
 *
 * A version is MAJOR.MINOR.SUBMINOR packed into 32 bits (8, 8 and 16 bits). An application
 * may define MRC_API_VER_USED before including mrc.h to say which version it was written for;
 * without it the current version is assumed. mrc_create_context() takes the same number at
 * run time (struct mrc_context_attr) so that one library can serve older applications.
 *
 * Written for this repository from the interface documented by the OCP MRC companion
 * repository; the names and values are the interface, the text is ours.
 */
#ifndef _MRC_API_VER_H_
#define _MRC_API_VER_H_

#define MRC_API_VER_MAJOR_OFFSET 24
#define MRC_API_VER_MINOR_OFFSET 16
#define MRC_API_VER_SUBMINOR_OFFSET 0

#define MRC_API_VER(_major, _minor, _sub_minor)                                      \
  (((_major) << MRC_API_VER_MAJOR_OFFSET) | ((_minor) << MRC_API_VER_MINOR_OFFSET) | \
   ((_sub_minor)) << MRC_API_VER_SUBMINOR_OFFSET)

/* "Whatever the library's current version is." */
#define MRC_API_VER_LATEST MRC_API_VER(0xFF, 0xFF, 0xFFFF)

#define MRC_API_CURRENT_VERSION MRC_API_VER(1, 0, 1)
#define MRC_API_LAST_SUPPORTED_VERSION MRC_API_VER(0, 0, 0)

#ifndef MRC_API_VER_USED
#define MRC_API_VER_USED MRC_API_CURRENT_VERSION
#elif MRC_API_VER_USED == MRC_API_VER_LATEST
#undef MRC_API_VER_USED
#define MRC_API_VER_USED MRC_API_CURRENT_VERSION
#endif

/* An application asking for a version this header does not describe must not compile. */
#if MRC_API_VER_USED > MRC_API_CURRENT_VERSION
#error "MRC_API_VER_USED is greater than MRC_API_CURRENT_VERSION"
#elif MRC_API_VER_USED < MRC_API_LAST_SUPPORTED_VERSION
#error "MRC_API_VER_USED is less than MRC_API_LAST_SUPPORTED_VERSION"
#elif MRC_API_VER_USED == MRC_API_LAST_SUPPORTED_VERSION
#warning "MRC_API_VER_USED equals MRC_API_LAST_SUPPORTED_VERSION and may become obsolete"
#endif

/* The provider's own (vendor) API surface, versioned the same way but independently. */
#define MRC_VENDOR_API_CURRENT_VERSION MRC_API_VER(1, 0, 0)
#define MRC_VENDOR_API_LAST_SUPPORTED_VERSION MRC_API_VER(0, 0, 0)

#ifndef MRC_VENDOR_API_VER_USED
#define MRC_VENDOR_API_VER_USED MRC_VENDOR_API_CURRENT_VERSION
#elif MRC_VENDOR_API_VER_USED == MRC_API_VER_LATEST
#undef MRC_VENDOR_API_VER_USED
#define MRC_VENDOR_API_VER_USED MRC_VENDOR_API_CURRENT_VERSION
#endif

#if MRC_VENDOR_API_VER_USED > MRC_VENDOR_API_CURRENT_VERSION
#error "MRC_VENDOR_API_VER_USED is greater than MRC_VENDOR_API_CURRENT_VERSION"
#elif MRC_VENDOR_API_VER_USED < MRC_VENDOR_API_LAST_SUPPORTED_VERSION
#error "MRC_VENDOR_API_VER_USED is less than MRC_VENDOR_API_LAST_SUPPORTED_VERSION"
#elif MRC_VENDOR_API_VER_USED == MRC_VENDOR_API_LAST_SUPPORTED_VERSION
#warning \
    "MRC_VENDOR_API_VER_USED equals MRC_VENDOR_API_LAST_SUPPORTED_VERSION and may become obsolete"
#endif

#endif /* _MRC_API_VER_H_ */
