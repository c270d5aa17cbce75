#ifdef __cplusplus
}
#endif

#endif /* MMSCHED_H */
